"""Token-exact prompts from hash ids (SPEC §2 Content).

Every hash id of a session scope maps to one deterministic block of token ids, keyed by
`(seed, scope, hash id)`, so equal ids give equal blocks and the recorded prefix reuse is
reproduced exactly. Tokens beyond the last block are keyed by the request (never shared). A
cache-bust marker, the same for a whole session tree, replaces the prompt's leading tokens.
`token_scale K` renders each block as block_size / K tokens (and ISL, OSL divided by K) so
real prefix structure fits a tiny test model.

All arithmetic is vectorized splitmix64 over numpy uint64 arrays (wrapping by design).
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from dataclasses import dataclass

import msgspec
import numpy as np

from agentx.errors import AgentxError
from agentx.traces.model import Request, Session

MARKER_TOKENS = 4
# Ids 1,000..29,999 exist in every common vocabulary (Llama 3: 128k, Qwen: 152k, Mistral: 32k,
# GPT-2: 50k) and avoid the low ids where byte and special tokens usually live.
DEFAULT_TOKEN_RANGE = (1_000, 30_000)

_M1, _M2, _G = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB), np.uint64(0x9E3779B97F4A7C15)


def mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer, elementwise."""
    x = x ^ (x >> np.uint64(30))
    x = x * _M1
    x = x ^ (x >> np.uint64(27))
    x = x * _M2
    return x ^ (x >> np.uint64(31))


def key64(*parts) -> int:
    """A stable 64-bit key of strings and ints (not Python's salted hash)."""
    digest = hashlib.blake2b(repr(parts).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little")


def parse_token_range(text: str) -> tuple[int, int]:
    try:
        lo, hi = (int(x) for x in text.split(":"))
    except ValueError:
        raise AgentxError(f"--token-range: want LO:HI, got {text!r}") from None
    if not 0 <= lo < hi:
        raise AgentxError(f"--token-range: want 0 <= LO < HI, got {text!r}")
    return lo, hi


@dataclass(frozen=True)
class ContentConfig:
    seed: int = 0
    token_range: tuple[int, int] = DEFAULT_TOKEN_RANGE
    token_scale: int = 1

    def __post_init__(self):
        if self.token_scale < 1:
            raise AgentxError(f"--token-scale must be >= 1, got {self.token_scale}")


class PromptBuilder:
    """Renders the token ids of a request; one per run (cheap to build)."""

    def __init__(self, cfg: ContentConfig, cache_bytes: int = 64 << 20):
        self.cfg = cfg
        self.lo = np.uint64(cfg.token_range[0])
        self.span = np.uint64(cfg.token_range[1] - cfg.token_range[0])
        self._scope_keys: dict[str, np.uint64] = {}
        # JSON text ("1,2,3") of rendered blocks by block key, LRU, bounded in bytes
        self._json: OrderedDict[int, bytes] = OrderedDict()
        self._json_bytes, self.cache_bytes = 0, cache_bytes

    def block_tokens(self, session: Session) -> int:
        return max(1, session.block_size // self.cfg.token_scale)

    def isl(self, session: Session, request: Request) -> int:
        return max(1, round(session.replay_isl(request) / self.cfg.token_scale))

    def osl(self, request: Request) -> int:
        return max(1, round(request.osl / self.cfg.token_scale))

    def _scope_key(self, session: Session) -> np.uint64:
        scope = session.id if session.hash_id_scope == "local" else "<global>"
        key = self._scope_keys.get(scope)
        if key is None:
            key = self._scope_keys[scope] = np.uint64(key64("blocks", self.cfg.seed, scope))
        return key

    def _tokens(self, keys: np.ndarray, width: int) -> np.ndarray:
        cols = np.arange(width, dtype=np.uint64) * _G
        raw = mix64(keys[:, None] ^ cols[None, :])
        return (raw % self.span + self.lo).ravel()

    def prompt(self, session: Session, request: Request, request_key: int, marker: int) -> np.ndarray:
        """Token ids (int64) of the request: hash blocks, then an unshared tail, with the tree's
        marker over the leading tokens; exactly `isl()` long."""
        isl, width = self.isl(session, request), self.block_tokens(session)
        ids = request.hash_ids.astype(np.uint64)
        blocks = self._tokens(mix64(ids ^ self._scope_key(session)), width)[:isl]
        tail = isl - len(blocks)
        if tail > 0:
            tail_keys = np.uint64(request_key) + np.arange(-(-tail // width), dtype=np.uint64)
            blocks = np.concatenate([blocks, self._tokens(mix64(tail_keys), width)[:tail]])
        out = blocks.astype(np.int64)
        m = min(MARKER_TOKENS, isl)
        out[:m] = self._tokens(mix64(np.array([marker], dtype=np.uint64)), MARKER_TOKENS)[:m]
        return out

    def prompt_json(self, session: Session, request: Request, request_key: int, marker: int) -> tuple[bytes, int]:
        """The same tokens as `prompt()` as a JSON array, from cached per-block JSON text (the
        hot path of the `tokens` wire mode); returns (bytes, ISL)."""
        isl, width = self.isl(session, request), self.block_tokens(session)
        n_full = min(len(request.hash_ids), isl // width)
        if n_full < 2:
            return msgspec.json.encode(self.prompt(session, request, request_key, marker).tolist()), isl
        keys = mix64(request.hash_ids[:n_full].astype(np.uint64) ^ self._scope_key(session))
        head = self.prompt(session, _head_request(request, width), request_key, marker)  # marker block
        parts = [msgspec.json.encode(head.tolist())[1:-1]]
        cache, missing = self._json, []
        key_list = keys[1:].tolist()
        for k in key_list:
            if k not in cache:
                missing.append(k)
        if missing:
            rows = self._tokens(np.array(missing, dtype=np.uint64), width).reshape(len(missing), width)
            for k, row in zip(missing, rows.tolist()):
                text = msgspec.json.encode(row)[1:-1]
                cache[k] = text
                self._json_bytes += len(text)
        for k in key_list:
            parts.append(cache[k])
            cache.move_to_end(k)
        while self._json_bytes > self.cache_bytes and len(cache) > len(key_list):
            self._json_bytes -= len(cache.popitem(last=False)[1])
        rest = isl - n_full * width
        if rest > 0 and len(request.hash_ids) > n_full:  # the start of one more (partial) block
            key = mix64(request.hash_ids[n_full:n_full + 1].astype(np.uint64) ^ self._scope_key(session))
            parts.append(msgspec.json.encode(self._tokens(key, width)[:rest].astype(np.int64).tolist())[1:-1])
        elif rest > 0:  # the request's own tail, as prompt() renders it
            tail_keys = np.uint64(request_key) + np.arange(-(-rest // width), dtype=np.uint64)
            parts.append(msgspec.json.encode(self._tokens(mix64(tail_keys), width)[:rest].astype(np.int64).tolist())[1:-1])
        return b"[" + b",".join(parts) + b"]", isl

    def random_prompt(self, key: int, n: int) -> np.ndarray:
        """`n` random token ids (fixed-sequence scenarios)."""
        width = 64
        keys = mix64(np.uint64(key) + np.arange(-(-n // width), dtype=np.uint64))
        return self._tokens(keys, width)[:n].astype(np.int64)


def _head_request(request: Request, width: int) -> Request:
    """A stand-in request holding only the first block (its tokens carry the marker)."""
    from dataclasses import replace

    return replace(request, isl=width, hash_ids=request.hash_ids[:1])
