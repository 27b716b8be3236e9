"""Finding trace files, detecting their format, and loading them into the trace model."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Callable, Iterable, Literal

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
from agentx.traces.source import read_trace_bytes
from agentx.traces.weka import read_weka, write_weka

Format = Literal["weka", "mooncake", "bailian", "agentic-mooncake", "mooncake-delta", "tracelab", "trie", "rollout"]
FORMATS: tuple[str, ...] = ("weka", "mooncake", "bailian", "agentic-mooncake", "mooncake-delta", "tracelab", "trie",
                            "rollout")
_READERS: dict[str, Callable] = {
    "weka": read_weka, "mooncake": read_mooncake, "bailian": read_bailian, "agentic-mooncake": read_agentic,
    "mooncake-delta": read_mooncake_delta, "tracelab": read_tracelab, "trie": read_trie, "rollout": read_rollout,
}
_WRITERS: dict[str, Callable] = {"mooncake": write_mooncake, "bailian": write_bailian,
                                 "agentic-mooncake": write_agentic, "tracelab": write_tracelab}
WRITE_FORMATS: tuple[str, ...] = ("weka", *_WRITERS)
_SUFFIXES = (".json", ".jsonl", ".csv")
# first-row keys that name a row format (checked in this order; Mooncake delta has Mooncake's keys)
_ROW_KEYS: tuple[tuple[str, str], ...] = (
    ("chat_id", "bailian"), ("request_id", "agentic-mooncake"), ("newly_append_tokens", "tracelab"),
    ("input_tokens_total", "tracelab"), ("num_turns", "trie"), ("out_lens", "rollout"), ("input_length", "mooncake"),
)
_UNKNOWN = "not a known trace record (WEKA, Mooncake, agentic Mooncake, Bailian, TraceLab, TRIE or rollout)"


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
            raise TraceError(str(p), "", "no such file or folder")
    return files


def detect_format(path: Path) -> Format:
    """Guess the format from the first record's keys."""
    try:
        with path.open("rb") as f:
            head = f.read(1 << 16)
    except OSError as exc:
        raise TraceError(str(path), "", f"cannot read: {exc.strerror or exc}") from None
    text = head.removeprefix(b"\xef\xbb\xbf").lstrip()
    if text.startswith(b"{") and b'"requests"' in head:
        return "weka"
    first_line = text.split(b"\n", 1)[0]
    if is_tracelab_csv(first_line):
        return "tracelab"
    try:
        row = msgspec.json.decode(first_line)
    except (msgspec.DecodeError, RecursionError):
        row = None
        if len(head) == 1 << 16 and b"\n" not in text:  # a first line longer than the head: its keys
            row = {key: None for key, _ in _ROW_KEYS if f'"{key}"'.encode() in text}
    if isinstance(row, dict):
        if "requests" in row:
            return "weka"
        for key, fmt in _ROW_KEYS:
            if key in row:
                return fmt  # type: ignore[return-value]
    read_trace_bytes(path)  # the clearer error when there is one: empty, UTF-16
    raise TraceError(str(path), "line 1", _UNKNOWN)


def load_file(path: Path, fmt: Format | None = None, warn: Callable[[str], None] | None = None) -> list[Session]:
    fmt = fmt or detect_format(path)
    return [replace(s, source=str(path)) for s in _READERS[fmt](path, warn=warn)]


def load_sessions(
    paths: Iterable[str | Path],
    fmt: Format | None = None,
    warn: Callable[[str], None] | None = None,
) -> list[Session]:
    """Load every session of every file named; bad input raises TraceError."""
    sessions: list[Session] = []
    with gc_paused():
        for f in trace_files(paths):
            sessions.extend(load_file(f, fmt, warn))
    return sessions


def write_sessions(sessions: list[Session], path: str | Path, fmt: Format, **options) -> None:
    """Write in one format. WEKA to a folder writes one file per session; to a file, JSONL."""
    path = Path(path)
    if fmt == "weka":
        if path.suffix in _SUFFIXES:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_weka(sessions, path, **options)
        else:
            path.mkdir(parents=True, exist_ok=True)
            for s in sessions:
                write_weka([s], path / f"{s.id.replace('/', '_')}.json", **options)
        return
    if fmt not in _WRITERS:
        raise AgentxError(f"{fmt} is read-only (write one of {', '.join(WRITE_FORMATS)})", "to")
    path.parent.mkdir(parents=True, exist_ok=True)
    _WRITERS[fmt](sessions, path)
