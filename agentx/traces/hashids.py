"""Fast, memory-sharing parsing and writing of hash-id arrays.

A session resends its whole history every turn, so request k+1's `hash_ids` text almost always
starts with request k's. `StreamIdParser` compares the raw JSON bytes, parses only the new
suffix, and hands out numpy views of one buffer per run of extending requests: parsing work
and memory scale with the unique blocks, not with the sum of all contexts.
"""

from __future__ import annotations

import msgspec
import numpy as np

from agentx.errors import TraceError
from agentx.traces.model import EMPTY_IDS, HashId, ids_array

_IdList = list[HashId]
_ids_decoder = msgspec.json.Decoder(_IdList)


def decode_ids(raw: bytes, file: str, record: str) -> np.ndarray:
    """Decode one JSON array of non-negative integers into a fresh id array."""
    try:
        values = _ids_decoder.decode(raw)
    except msgspec.DecodeError as exc:  # ValidationError included
        # `record` names the field; msgspec's index would count from the parsed suffix only
        raise TraceError(file, record, str(exc).split(" - at `")[0]) from None
    except RecursionError:
        raise TraceError(file, record, "JSON nested too deeply") from None
    if not values:
        return EMPTY_IDS
    ids = np.fromiter(values, np.uint64, len(values))  # (faster than np.array on a list of ints)
    return ids if ids.max() >= 2**32 else ids.astype(np.uint32)


def id_memory(ids: np.ndarray) -> tuple:
    """Where an id array's elements lie (address, dtype, strides): arrays with the same key hold
    the same ids as far as the shorter reaches (`StreamIdParser` hands a stream's requests out
    as views of one buffer), so work over their common part can be done once."""
    return ids.__array_interface__["data"][0], ids.dtype.str, ids.strides


def by_memory(arrays: list[np.ndarray]) -> tuple[list[tuple], dict[tuple, np.ndarray]]:
    """Each array's `id_memory` key, and per key the longest array with it (which holds the ids
    of every other array with that key)."""
    memory = list(map(id_memory, arrays))
    return memory, {m: a for m, a in sorted(zip(memory, arrays), key=lambda p: len(p[1]))}


_SPACE = (b" ", b"\n", b"\t", b"\r")


def _tight(raw) -> bytes:
    """The raw JSON value as bytes without surrounding white space (copies only when needed)."""
    if raw is None:
        return b"[]"
    raw = raw if type(raw) is bytes else bytes(raw)
    if raw[:1] in _SPACE or raw[-1:] in _SPACE:
        raw = raw.strip()
    return raw


class StreamIdParser:
    """Parses the `hash_ids` of one stream's requests, in order, sharing memory across them."""

    def __init__(self, file: str):
        self.file = file
        self._prev_body = b""  # previous raw array without its closing bracket
        self._prev_len = 0
        self._pieces: list[np.ndarray] = []  # the current run's buffer, in pieces
        self._run: list[tuple[int, int]] = []  # (slot, length) of the requests in the run
        self._out: list[np.ndarray | None] = []

    def add(self, raw: bytes | None, record: str) -> int:
        """Queue one request's raw ids; returns its slot for `finish()`."""
        slot = len(self._out)
        self._out.append(None)
        raw = _tight(raw)
        if raw == b"null":
            raw = b"[]"
        if not raw.startswith(b"[") or not raw.endswith(b"]"):
            raise TraceError(self.file, record, "expected an array of integers")
        shared, rest = self._shared_prefix(raw)
        if shared == self._prev_len and self._run:
            new = decode_ids(b"[" + rest + b"]", self.file, record) if rest else EMPTY_IDS
        else:
            prefix = self._prefix_array(shared)
            self._close_run()
            new = decode_ids(b"[" + rest + b"]", self.file, record) if rest else EMPTY_IDS
            if len(prefix):
                self._pieces.append(prefix)
        if len(new):
            self._pieces.append(new)
        length = shared + len(new)
        self._run.append((slot, length))
        self._prev_body = raw[:-1] if raw[-2:-1] not in _SPACE else raw[:-1].rstrip()
        self._prev_len = length
        return slot

    def _shared_prefix(self, raw: bytes) -> tuple[int, bytes]:
        """(elements shared with the previous array, the text of the remaining elements)."""
        body = self._prev_body
        if self._prev_len and raw.startswith(body):
            rest = raw[len(body) : -1].strip()
            if not rest:
                return self._prev_len, b""
            if rest.startswith(b","):
                return self._prev_len, rest[1:]
        if not self._prev_len:
            return 0, raw[1:-1].strip()
        # Diverged: keep the whole elements both arrays share, byte-wise.
        n = min(len(body), len(raw))
        a = np.frombuffer(body, dtype=np.uint8, count=n)
        b = np.frombuffer(raw, dtype=np.uint8, count=n)
        diff = np.flatnonzero(a != b)
        pos = int(diff[0]) if len(diff) else n
        if body[pos : pos + 1] == b"," and raw[pos : pos + 1] == b"]":
            return body.count(b",", 0, pos) + 1, b""  # raw is a prefix of the previous array
        cut = body.rfind(b",", 0, pos)  # the last separator before the first difference
        if cut <= 0:
            return 0, raw[1:-1].strip()
        return body.count(b",", 0, cut) + 1, raw[cut + 1 : -1].strip()

    def _prefix_array(self, n: int) -> np.ndarray:
        if n == 0:
            return EMPTY_IDS
        return np.concatenate(self._pieces)[:n] if len(self._pieces) > 1 else self._pieces[0][:n]

    def _close_run(self) -> None:
        if not self._run:
            return
        if not self._pieces:
            base = EMPTY_IDS
        else:
            dtype = np.uint64 if any(p.dtype == np.uint64 for p in self._pieces) else np.uint32
            base = ids_array(np.concatenate(self._pieces).astype(dtype, copy=False))
        for slot, length in self._run:
            self._out[slot] = base[:length] if length else EMPTY_IDS
        self._pieces, self._run = [], []

    def finish(self) -> list[np.ndarray]:
        """The id arrays of all queued requests, by slot."""
        self._close_run()
        return self._out  # type: ignore[return-value]


class ChainIdParser:
    """Routes each request's ids to a `StreamIdParser` per first hash block.

    Top-level requests interleave the main chain with aux chains (titles, classifiers);
    keying by the first block keeps each chain's requests sharing one buffer.
    """

    def __init__(self, file: str):
        self.file = file
        self._parsers: dict[bytes, StreamIdParser] = {}
        self._slots: list[tuple[bytes, int]] = []

    def add(self, raw: bytes | None, record: str) -> int:
        text = _tight(raw)
        head = text[1:32].lstrip()  # the first element's digits key the chain
        end = next((i for i, c in enumerate(head) if c in b",] \n\t\r"), len(head))
        key = head[:end]
        parser = self._parsers.get(key)
        if parser is None:
            parser = self._parsers[key] = StreamIdParser(self.file)
        self._slots.append((key, parser.add(text, record)))
        return len(self._slots) - 1

    def finish(self) -> list[np.ndarray]:
        done = {key: parser.finish() for key, parser in self._parsers.items()}
        return [done[key][slot] for key, slot in self._slots]


class IdWriter:
    """Renders id arrays as JSON text, once per shared buffer, slicing for each view."""

    def __init__(self):
        self._cache: dict[int, tuple[np.ndarray, bytes, np.ndarray]] = {}

    def __call__(self, ids: np.ndarray) -> msgspec.Raw:
        n = len(ids)
        if n == 0:
            return msgspec.Raw(b"[]")
        base = ids.base if isinstance(ids.base, np.ndarray) and ids.base.ndim == 1 else ids
        if base is not ids and base.ctypes.data != ids.ctypes.data:
            base = ids  # a view that does not start at its buffer's start
        key = id(base)
        hit = self._cache.get(key)
        if hit is None or hit[0] is not base:
            text = ",".join(map(str, base.tolist())).encode()
            digits = np.ones(len(base), dtype=np.int64)
            for k in range(1, 20):
                digits += base >= np.uint64(10**k)
            ends = np.cumsum(digits + 1) - 1
            hit = (base, text, ends)
            self._cache[key] = hit
        _, text, ends = hit
        return msgspec.Raw(b"[" + text[: int(ends[n - 1])] + b"]")
