"""Errors meant for people: one line naming the file, the record and the field."""


class AgentxError(Exception):
    """A user-facing error; the CLI prints its message on one line and exits non-zero."""


class TraceError(AgentxError):
    """Malformed trace input. The message names the file, the record and the field."""

    def __init__(self, file: str, record: str, problem: str):
        self.file, self.record, self.problem = file, record, problem
        where = f"{file}: {record}" if record else file
        super().__init__(f"{where}: {problem}")

    def __reduce__(self):  # so it crosses process boundaries intact
        return TraceError, (self.file, self.record, self.problem)
