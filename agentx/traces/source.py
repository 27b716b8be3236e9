"""Reading a trace file's bytes and decoding its JSON: every failure is one TraceError line.

Shared by every reader, so each handles the same hostile inputs the same way: an unreadable
or empty file, UTF-16 text, a UTF-8 byte-order mark (skipped), malformed JSON, values of the
wrong type or outside the trace model's bounds, and nesting too deep for the decoder.

Reads are bounded (SPEC section 1, "Bounds"): a trace file is a regular file of at most
`MAX_TRACE_FILE` bytes, checked before a byte is read, and its head is checked for UTF-16 or
binary text before the rest is read; row formats stream line by line, a line at most
`MAX_TRACE_LINE` bytes (refused before it is held whole) and a file at most `MAX_TRACE_ROWS` rows.
"""

from __future__ import annotations

import os
import stat
from itertools import count
from pathlib import Path
from typing import BinaryIO, Iterator

import msgspec

from agentx.errors import TraceError
from agentx.userfiles import kind_of

MAX_TRACE_FILE = 1 << 30  # bytes of one trace file
MAX_TRACE_LINE = 16 << 20  # bytes of one line of a row format
MAX_TRACE_ROWS = 2_000_000  # rows of one file; also requests of a corpus (traces/load.py)
_BOM = b"\xef\xbb\xbf"


def _open(path: str | Path) -> BinaryIO:
    """The open file, positioned after a UTF-8 byte-order mark: a regular file of at most
    MAX_TRACE_FILE bytes whose head is not UTF-16 or binary."""
    file = str(path)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))  # a FIFO cannot block the open
    except OSError as exc:
        raise TraceError(file, "", f"cannot read: {exc.strerror or exc}") from None
    f = os.fdopen(fd, "rb")
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise TraceError(file, "", f"not a regular file ({kind_of(st.st_mode)})")
        if st.st_size > MAX_TRACE_FILE:
            raise TraceError(file, "", f"{st.st_size:,} bytes, over the bound of {MAX_TRACE_FILE:,} bytes for a "
                             "trace file (split it: a folder of trace files is one corpus)")
        head = f.read(len(_BOM) + 2)
        skip = len(_BOM) if head.startswith(_BOM) else 0
        head = head[skip:]
        if head[:2] in (b"\xff\xfe", b"\xfe\xff") or (len(head) > 1 and (head[0] == 0 or head[1] == 0)):
            raise TraceError(file, "", "UTF-16 (or binary) text: trace files must be UTF-8 JSON")
        f.seek(skip)
    except BaseException:
        f.close()
        raise
    return f


def read_trace_bytes(path: str | Path) -> bytes:
    """The file's bytes without a UTF-8 byte-order mark; empty, unreadable, UTF-16 files and files
    over MAX_TRACE_FILE raise."""
    with _open(path) as f:
        try:
            data = f.read()  # sized from the file's length (checked): read(n) would allocate n
        except OSError as exc:
            raise TraceError(str(path), "", f"cannot read: {exc.strerror or exc}") from None
    if len(data) > MAX_TRACE_FILE:  # it grew since the check
        raise TraceError(str(path), "", f"over the bound of {MAX_TRACE_FILE:,} bytes for a trace file")
    if not data or data.isspace():
        raise TraceError(str(path), "", "empty file")
    return data


def trace_lines(path: str | Path) -> Iterator[tuple[int, bytes]]:
    """(line number, line) of every non-blank line, read line by line: a line over MAX_TRACE_LINE
    bytes or a file of more than MAX_TRACE_ROWS rows raises before more of it is read."""
    file, rows = str(path), 0
    with _open(path) as f:
        for n in count(1):
            try:
                line = f.readline(MAX_TRACE_LINE + 1)
            except OSError as exc:
                raise TraceError(file, f"line {n}", f"cannot read: {exc.strerror or exc}") from None
            if not line:
                break
            if len(line) > MAX_TRACE_LINE and not line.endswith(b"\n"):
                raise TraceError(file, f"line {n}", f"over the bound of {MAX_TRACE_LINE:,} bytes for a line")
            if line.strip():
                rows += 1
                if rows > MAX_TRACE_ROWS:
                    raise TraceError(file, f"line {n}", f"more than {MAX_TRACE_ROWS:,} rows in one trace file "
                                     "(split it)")
                yield n, line
    if not rows:
        raise TraceError(file, "", "empty file")


def decode(decoder: msgspec.json.Decoder, data: bytes, file: str, record: str):
    """Decode one JSON document; errors name the file, the record and the field."""
    try:
        return decoder.decode(data)
    except msgspec.ValidationError as exc:
        raise _invalid(exc, file, record) from None
    except msgspec.DecodeError as exc:
        raise TraceError(file, record, f"invalid JSON: {exc}") from None
    except RecursionError:
        raise TraceError(file, record, "JSON nested too deeply") from None


def convert(cells: dict[str, str | None], row_type: type, file: str, record: str):
    """A text record (a CSV row) as `row_type`, numbers parsed from their text and held to the
    same bounds as JSON; errors name the file, the record and the column, and quote the cell."""
    try:
        return msgspec.convert(cells, row_type, strict=False)
    except msgspec.ValidationError as exc:
        error = _invalid(exc, file, record)
        column = error.record.rpartition(" ")[2]
        if column in cells:
            cell = "missing cell" if cells[column] is None else f"cell {cells[column]!r}"
            error = TraceError(file, error.record, f"{cell}: {error.problem}")
        raise error from None


def _invalid(exc: msgspec.ValidationError, file: str, record: str) -> TraceError:
    message, _, path = str(exc).rpartition(" - at `")
    field = path.rstrip("`").replace("$.", "", 1).replace("$", "", 1) if message else ""
    return TraceError(file, f"{record} {field}".strip(), message or str(exc))
