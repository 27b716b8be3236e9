"""Incremental tokenization: a turn re-tokenizes only what it added to its stream's last prompt.

An agent resends its whole history every turn, so tokenizing every prompt in full costs
O(turns x context). For each stream the previous prompt's text, ids and character offsets are
kept. The next prompt's common prefix with it is found; tokens that end inside the prefix are
kept except the last complete one (rolled back, so merges across the join are recomputed);
then the cut moves further back to a split the pre-tokenizer is certain to make (a space between
two non-space characters: every GPT-2, Llama-3 and SentencePiece-style pre-tokenizer starts a new
piece there and none of its pieces before it depends on what follows), and only the text from
that split on is tokenized. The result equals full tokenization (tests check every transition of
recorded sessions); with no such split in the prefix the prompt is tokenized in full.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from agentx.errors import AgentxError

_SAFE_SPLIT = re.compile(r"(?<=\S) (?=\S)")
_LOOKBACK = 4096  # characters searched back for a safe split before giving up


def load_tokenizer(path: str | Path):
    from tokenizers import Tokenizer

    try:
        return Tokenizer.from_file(str(path))
    except Exception as e:  # noqa: BLE001 - tokenizers raises plain Exceptions
        raise AgentxError(f"{path}: cannot load the tokenizer: {e}") from None


def common_prefix(a: str, b: str) -> int:
    """Length of the common prefix, by binary search over slice comparisons (memcmp speed)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


@dataclass
class _Tokens:
    text: str
    ids: np.ndarray
    starts: np.ndarray
    ends: np.ndarray


class IncrementalTokenizer:
    """`chars_tokenized / chars_total` is the share of the prompts' text `encode` tokenized (at
    most 1: each prompt counts its length once, and what of it was tokenized); `full` counts in
    neither."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self._last: dict[object, _Tokens] = {}
        self.chars_total = 0
        self.chars_tokenized = 0

    def _encode(self, text: str, offset: int = 0) -> _Tokens:
        enc = self.tokenizer.encode(text, add_special_tokens=False)
        offsets = np.asarray(enc.offsets, dtype=np.int64).reshape(-1, 2) + offset
        return _Tokens(text, np.asarray(enc.ids, dtype=np.uint32), offsets[:, 0], offsets[:, 1])

    def forget(self) -> None:
        """Drop every stream's last prompt."""
        self._last.clear()

    def full(self, text: str) -> np.ndarray:
        return self._encode(text).ids

    def encode(self, stream, text: str) -> np.ndarray:
        """The token ids of `text`, reusing the tokens of the stream's previous prompt."""
        self.chars_total += len(text)
        prev = self._last.get(stream)
        cut = self._restart(prev, text) if prev is not None else None
        if cut is None:
            tokens = self._encode(text)
            self.chars_tokenized += len(text)
        else:
            keep, at = cut
            tail = self._encode(text[at:], at)
            self.chars_tokenized += len(text) - at
            tokens = _Tokens(text, np.concatenate([prev.ids[:keep], tail.ids]),
                             np.concatenate([prev.starts[:keep], tail.starts]),
                             np.concatenate([prev.ends[:keep], tail.ends]))
        self._last[stream] = tokens
        return tokens.ids

    @staticmethod
    def _restart(prev: _Tokens, text: str) -> tuple[int, int] | None:
        """(tokens kept, character to tokenize from), or None to tokenize in full."""
        shared = common_prefix(prev.text, text)
        inside = int(np.searchsorted(prev.ends, shared, side="right"))  # tokens ending inside the prefix
        if inside < 2:
            return None
        limit = int(prev.starts[inside - 1])  # roll back the last complete token
        window_start = max(0, limit - _LOOKBACK)
        # the split must leave a non-space character after it inside the shared prefix
        splits = list(_SAFE_SPLIT.finditer(text, window_start, min(limit, shared - 1) + 1))
        for m in reversed(splits):
            at = m.start()
            keep = int(np.searchsorted(prev.starts, at, side="left"))
            if keep < len(prev.starts) and prev.starts[keep] == at and (keep == 0 or prev.ends[keep - 1] <= at):
                return keep, at
        return None
