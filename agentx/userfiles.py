"""Files and folders a user names: checked by type before they are opened, read with a size bound.

A FIFO would block the reader forever, a symlink loop or a folder where a file belongs would
surface as a traceback, and an unbounded read of a huge file exhausts memory: every input file
agentx reads for the results layer and the capture import goes through here first.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import Any, Iterator

from agentx.errors import AgentxError

MiB = 1 << 20
GiB = 1 << 30


def shown(path: str | Path) -> str:
    """A path as printed in a one-line error: control characters (a newline in a name) escaped."""
    text = str(path)
    return text if text.isprintable() else text.encode("unicode_escape", "backslashreplace").decode("ascii")


def _stat(path: Path, want: str) -> os.stat_result:
    try:
        return os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise AgentxError(f"{shown(path)}: a symlink loop, want {want}") from None
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            raise AgentxError(f"{shown(path)}: no such file or folder") from None
        raise AgentxError(f"{shown(path)}: cannot read: {exc.strerror or exc}") from None


def kind_of(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "a regular file"


def check_file(path: Path, limit: int) -> int:
    """The size of `path`, a regular file of at most `limit` bytes; anything else raises."""
    st = _stat(path, "a file")
    if not stat.S_ISREG(st.st_mode):
        raise AgentxError(f"{shown(path)}: {kind_of(st.st_mode)} where a file belongs")
    if st.st_size > limit:
        raise AgentxError(f"{shown(path)}: {st.st_size:,} bytes, over the bound of {limit:,}")
    return st.st_size


def check_folder(path: Path) -> None:
    st = _stat(path, "a folder")
    if not stat.S_ISDIR(st.st_mode):
        raise AgentxError(f"{shown(path)}: {kind_of(st.st_mode)} where a folder belongs")


def is_regular(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


def _open(path: Path, limit: int):
    """A binary file object of a checked regular file (O_NONBLOCK: a FIFO swapped in after the
    check cannot block the open)."""
    check_file(path, limit)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise AgentxError(f"{shown(path)}: cannot read: {exc.strerror or exc}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise AgentxError(f"{shown(path)}: not a regular file")
    return os.fdopen(fd, "rb")


def read_bounded(path: Path, limit: int) -> bytes:
    """The bytes of a regular file of at most `limit` bytes."""
    with _open(path, limit) as f:
        data = f.read(limit + 1)
    if len(data) > limit:  # it grew since the check
        raise AgentxError(f"{shown(path)}: over the bound of {limit:,} bytes")
    return data


def bounded_lines(path: Path, limit: int, max_line: int) -> Iterator[tuple[int, bytes]]:
    """(line number, line without its newline) of a regular file; a line over `max_line` bytes
    raises before it is held in memory whole."""
    with _open(path, limit) as f:
        n = 0
        while True:
            line = f.readline(max_line + 1)
            if not line:
                return
            n += 1
            if len(line) > max_line and not line.endswith(b"\n"):
                raise AgentxError(f"{shown(path)}: line {n}: over the bound of {max_line:,} bytes")
            yield n, line.rstrip(b"\n")


def depth_problem(obj: Any, limit: int) -> str | None:
    """'nested N deep' when a decoded document nests deeper than `limit`, else None (iterative)."""
    stack = [(obj, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > limit:
            return f"nested over {limit} deep"
        if isinstance(value, dict):
            stack.extend((v, depth + 1) for v in value.values())
        elif isinstance(value, list):
            stack.extend((v, depth + 1) for v in value)
    return None
