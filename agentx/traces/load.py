"""Finding trace files, detecting their format, and loading them into the trace model."""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Iterable

import msgspec

from agentx.common import gc_paused
from agentx.errors import AgentxError, TraceError
from agentx.traces.agentic import read_agentic, read_mooncake_delta, write_agentic
from agentx.traces.bailian import read_bailian, write_bailian
from agentx.traces.model import Session
from agentx.traces.mooncake import read_mooncake, write_mooncake
from agentx.traces.rollout import read_rollout
from agentx.traces.tracelab import is_tracelab_csv, read_tracelab, write_tracelab
from agentx.traces.trie import read_trie
from agentx.traces.source import MAX_TRACE_ROWS, read_trace_bytes
from agentx.traces.weka import read_weka, write_weka
from agentx.userfiles import kind_of


@dataclass(frozen=True)
class TraceFormat:
    """One trace format: its name (`--format`), how a file of it is recognized, how it is read
    and, unless read-only, written. Adding a format is a row of FORMAT_TABLE and its module."""

    name: str
    label: str  # as the error for an unrecognized record names it
    read: Callable[..., list[Session]]  # (path, warn=None) -> sessions
    write: Callable[..., None] | None = None  # (sessions, path, **options); None: read-only
    keys: tuple[str, ...] = ()  # first-row keys that name it
    sniff: Callable[[bytes, bytes], bool] | None = None  # (the file's head, its first line): before any row
    fallback: bool = False  # its keys are shared by formats built on its rows: checked after theirs


def _write_weka(sessions: list[Session], path: Path, **options) -> None:
    """WEKA to a folder writes one file per session; to a file, JSONL."""
    if path.suffix in _SUFFIXES:
        write_weka(sessions, path, **options)
        return
    path.mkdir(parents=True, exist_ok=True)
    for s in sessions:
        write_weka([s], path / f"{s.id.replace('/', '_')}.json", **options)


FORMAT_TABLE: tuple[TraceFormat, ...] = (
    TraceFormat("weka", "WEKA", read_weka, _write_weka,
                sniff=lambda head, line: head.startswith(b"{") and b'"requests"' in head),
    TraceFormat("mooncake", "Mooncake", read_mooncake, write_mooncake, keys=("input_length",), fallback=True),
    TraceFormat("bailian", "Bailian", read_bailian, write_bailian, keys=("chat_id",)),
    TraceFormat("agentic-mooncake", "agentic Mooncake", read_agentic, write_agentic, keys=("request_id",)),
    TraceFormat("mooncake-delta", "Mooncake delta", read_mooncake_delta),  # Mooncake's rows: must be named
    TraceFormat("tracelab", "TraceLab", read_tracelab, write_tracelab,
                keys=("newly_append_tokens", "input_tokens_total"), sniff=lambda head, line: is_tracelab_csv(line)),
    TraceFormat("trie", "TRIE", read_trie, keys=("num_turns",)),
    TraceFormat("rollout", "rollout", read_rollout, keys=("out_lens",)),
)
_BY_NAME = {f.name: f for f in FORMAT_TABLE}
Format = str  # a name in FORMATS
FORMATS: tuple[str, ...] = tuple(_BY_NAME)
WRITE_FORMATS: tuple[str, ...] = tuple(f.name for f in FORMAT_TABLE if f.write)
_SUFFIXES = (".json", ".jsonl", ".csv")
_BY_KEYS = [f for f in FORMAT_TABLE if f.keys and not f.fallback] + [f for f in FORMAT_TABLE if f.fallback]
_KNOWN = [f.label for f in FORMAT_TABLE if f.keys or f.sniff]  # (a format neither names must be named)
_UNKNOWN = f"not a known trace record ({', '.join(_KNOWN[:-1])} or {_KNOWN[-1]})"


def trace_files(paths: Iterable[str | Path]) -> list[Path]:
    """The trace files named, with directories expanded to their .json/.jsonl/.csv files, sorted."""
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            found = sorted(f for f in p.rglob("*") if f.is_file() and f.suffix in _SUFFIXES)
            if not found:
                raise TraceError(str(p), "", "no .json, .jsonl or .csv trace files in this folder")
            files.extend(found)
        elif p.is_file():
            files.append(p)
        else:
            raise TraceError(str(p), "", _not_a_file(p))
    return files


def _not_a_file(path: Path) -> str:
    """Why a path named as a trace is neither a file nor a folder: a device (/dev/zero), a FIFO, a
    socket, a symlink loop, or nothing there."""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        return "a symlink loop" if exc.errno == errno.ELOOP else "no such file or folder"
    return f"not a regular file ({kind_of(mode)})"


def detect_format(path: Path) -> Format:
    """Guess the format from the file's head (`sniff`), else from the first record's keys."""
    try:
        with path.open("rb") as f:
            head = f.read(1 << 16)
    except OSError as exc:
        raise TraceError(str(path), "", f"cannot read: {exc.strerror or exc}") from None
    text = head.removeprefix(b"\xef\xbb\xbf").lstrip()
    first_line = text.split(b"\n", 1)[0]
    for f in FORMAT_TABLE:
        if f.sniff is not None and f.sniff(text, first_line):
            return f.name
    try:
        row = msgspec.json.decode(first_line)
    except (msgspec.DecodeError, RecursionError):
        row = None
        if len(head) == 1 << 16 and b"\n" not in text:  # a first line longer than the head: its keys
            row = {key: None for f in _BY_KEYS for key in f.keys if f'"{key}"'.encode() in text}
    if isinstance(row, dict):
        for f in _BY_KEYS:
            if any(key in row for key in f.keys):
                return f.name
    read_trace_bytes(path)  # the clearer error when there is one: empty, UTF-16
    raise TraceError(str(path), "line 1", _UNKNOWN)


def load_file(path: Path, fmt: Format | None = None, warn: Callable[[str], None] | None = None) -> list[Session]:
    fmt = fmt or detect_format(path)
    return [replace(s, source=str(path)) for s in _BY_NAME[fmt].read(path, warn=warn)]


def load_sessions(
    paths: Iterable[str | Path],
    fmt: Format | None = None,
    warn: Callable[[str], None] | None = None,
) -> list[Session]:
    """Load every session of every file named; bad input raises TraceError, and so does a corpus
    of more than MAX_TRACE_ROWS requests (about 1.6 KB of memory each: benchmarks/hostile_bounds.py)."""
    sessions: list[Session] = []
    requests = 0
    with gc_paused():
        for f in trace_files(paths):
            loaded = load_file(f, fmt, warn)
            requests += sum(s.n_requests for s in loaded)
            if requests > MAX_TRACE_ROWS:
                raise TraceError(str(f), "", f"the corpus holds more than {MAX_TRACE_ROWS:,} requests with this file "
                                 "(load fewer files)")
            sessions.extend(loaded)
    return sessions


def write_sessions(sessions: list[Session], path: str | Path, fmt: Format, **options) -> None:
    """Write in one format (`options`: the writer's, WEKA's time basis)."""
    path, writer = Path(path), getattr(_BY_NAME.get(fmt), "write", None)
    if writer is None:
        raise AgentxError(f"{fmt} is read-only (write one of {', '.join(WRITE_FORMATS)})", "to")
    path.parent.mkdir(parents=True, exist_ok=True)
    writer(sessions, path, **options)
