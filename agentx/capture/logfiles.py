"""Reading Claude Code's and Codex's session logs: every file checked by type before it is opened,
every line bounded before it is decoded, decoded strictly (UTF-8, no lone surrogates, no
NaN), nested at most MAX_DEPTH deep, and the fields `agentlogs` reads held to typed, bounded
Structs; so a hostile log is one TraceError line naming the file, the line and the field, and no
unbounded text reaches the tokenizer."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import Annotated, Any, Iterator

import msgspec

from agentx.errors import AgentxError, TraceError
from agentx.traces.model import MAX_NAME, MAX_TOKENS
from agentx.userfiles import bounded_lines, check_folder, depth_problem, is_regular, kind_of, shown

MAX_LOG_FILE = 8 << 30
MAX_LINE = 16 << 20  # one record: a long tool output; Claude Code and Codex cut theirs far below this
MAX_PROMPT = 64 << 20  # the record bytes of one call's prompt (10M tokens of text is ~40 MB)
MAX_DEPTH = 64  # content nesting (tool results inside messages inside ...)

Name = Annotated[str, msgspec.Meta(max_length=MAX_NAME)]
Stamp = Annotated[str, msgspec.Meta(max_length=100)]
Count = Annotated[int, msgspec.Meta(ge=0, le=MAX_TOKENS)]


class _Block(msgspec.Struct):
    type: Name | None = None


Content = str | list[_Block | str | None] | None


class ClaudeUsage(msgspec.Struct):
    input_tokens: Count | None = None
    cache_creation_input_tokens: Count | None = None
    cache_read_input_tokens: Count | None = None
    output_tokens: Count | None = None


class ClaudeMessage(msgspec.Struct):
    role: Name | None = None
    id: Name | None = None
    model: Name | None = None
    stop_reason: Name | None = None
    usage: ClaudeUsage | None = None
    content: Content = None


class ClaudeLine(msgspec.Struct):
    """A user or assistant record of a Claude Code session file."""
    message: ClaudeMessage
    type: Name | None = None
    sessionId: Name | None = None
    agentId: Name | None = None
    isSidechain: bool | None = None
    parentUuid: Name | None = None
    uuid: Name | None = None
    requestId: Name | None = None
    timestamp: Stamp | None = None
    isCompactSummary: bool | None = None


class CodexUsage(msgspec.Struct):
    input_tokens: Count | None = None
    output_tokens: Count | None = None


class CodexInfo(msgspec.Struct):
    last_token_usage: CodexUsage | None = None


class ThreadSpawn(msgspec.Struct):
    parent_thread_id: Name | None = None


class Subagent(msgspec.Struct):
    thread_spawn: ThreadSpawn | None = None


class Source(msgspec.Struct):
    subagent: Subagent | Name | None = None


class CodexPayload(msgspec.Struct):
    type: Name | None = None
    id: Name | None = None
    role: Name | None = None
    model: Name | None = None
    call_id: Name | None = None
    name: Name | None = None
    instructions: str | None = None
    source: Source | Name | None = None
    info: CodexInfo | None = None


class CodexLine(msgspec.Struct):
    """A line of a Codex rollout file."""
    type: Name | None = None
    timestamp: Stamp | None = None
    payload: CodexPayload | None = None


def log_files(root: Path, what: str, skipped: list[str] | None = None) -> list[Path]:
    """The *.jsonl files of a store (a folder, searched below) or the one file named. What the
    search passes by is told to `skipped` ("PATH: why"): a *.jsonl that is not a regular file (a
    folder, a FIFO, a symlink loop), a symlink loop, a symlinked folder (not followed), a folder
    that cannot be read."""
    if not root.exists() and not root.is_symlink():
        raise AgentxError(f"{shown(root)}: no such file or folder")
    if root.is_symlink() or not root.is_dir():
        return [root]  # checked by type as it is opened
    check_folder(root)
    files, passed = [], []
    for folder, dirs, names in os.walk(root, onerror=lambda e: passed.append(f"{shown(e.filename)}: cannot read "
                                                                            f"({e.strerror})")):
        for name in dirs + names:
            path = Path(folder, name)
            if name.endswith(".jsonl") and is_regular(path):
                files.append(path)
            elif why := _passed_by(path, name):
                passed.append(f"{shown(path)}: {why}")
    if skipped is not None:
        skipped.extend(sorted(passed))
    if not files:
        raise AgentxError(f"{shown(root)}: no {what} (*.jsonl files)" + (f"; passed by {passed[0]}" if passed else ""))
    return sorted(files)


def _passed_by(path: Path, name: str) -> str | None:
    """Why the search of a store passes `path` by, when it is worth a line (None: it is not)."""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        return "a symlink loop" if exc.errno == errno.ELOOP else None  # a dangling link: nothing was there
    if path.is_symlink() and stat.S_ISDIR(mode):
        return "a symlinked folder (not followed: it could loop back)"
    if name.endswith(".jsonl") and not stat.S_ISREG(mode):
        return f"{kind_of(mode)} where a file belongs"
    return None


def records(file: Path, kind: type) -> Iterator[tuple[str, dict, int]]:
    """(record name, object, bytes) of each line; the object's fields `kind` declares are checked
    (a Claude Code file's user and assistant records; every Codex line)."""
    try:
        lines = bounded_lines(file, MAX_LOG_FILE, MAX_LINE)
        for n, line in lines:
            if not line.strip():
                continue
            where = f"line {n}"
            try:
                obj = msgspec.json.decode(line)
            except (msgspec.DecodeError, UnicodeDecodeError, RecursionError) as exc:
                problem = "not UTF-8 text" if _not_utf8(line) else f"invalid JSON: {exc}"
                raise TraceError(shown(file), where, problem) from None
            if not isinstance(obj, dict):
                raise TraceError(shown(file), where, "not a JSON object")
            if problem := depth_problem(obj, MAX_DEPTH):
                raise TraceError(shown(file), where, problem)
            if kind is CodexLine or obj.get("type") in ("user", "assistant") and "message" in obj:
                check(obj, kind, file, where)
            yield where, obj, len(line)
    except TraceError:
        raise
    except AgentxError as exc:  # the file's type or a line's size
        raise TraceError(shown(file), "", str(exc).removeprefix(f"{shown(file)}: ")) from None


def check(obj: Any, kind: type, file: Path, where: str) -> None:
    try:
        msgspec.convert(obj, kind)
    except msgspec.ValidationError as exc:
        message, _, at = str(exc).rpartition(" - at `")
        field = at.rstrip("`").removeprefix("$").removeprefix(".")
        raise TraceError(shown(file), where, f"{field}: {message}" if message else str(exc)) from None


def _not_utf8(line: bytes) -> bool:
    try:
        line.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False
