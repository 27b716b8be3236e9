"""Errors meant for people: one line naming the file, the record and the field."""


class AgentxError(Exception):
    """A user-facing error; the CLI prints its message on one line and exits non-zero. An
    error about one setting names it (`setting`, e.g. "token_range"): the CLI words it as
    its flag (`--token-range`), a library caller sees the setting's name."""

    def __init__(self, message: str, setting: str | None = None):
        self.message, self.setting = message, setting
        super().__init__(f"{setting}: {message}" if setting else message)

    def __reduce__(self):  # so it crosses process boundaries intact
        return type(self), (self.message, self.setting)


class TraceError(AgentxError):
    """Malformed trace input. The message names the file, the record and the field."""

    def __init__(self, file: str, record: str, problem: str):
        self.file, self.record, self.problem = file, record, problem
        where = f"{file}: {record}" if record else file
        super().__init__(f"{where}: {problem}")

    def __reduce__(self):  # so it crosses process boundaries intact
        return TraceError, (self.file, self.record, self.problem)
