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

from dataclasses import dataclass

import numpy as np

from agentx.common import key64
from agentx.errors import AgentxError
from agentx.options import check_bounds, option
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


def parse_token_range(text: str) -> tuple[int, int]:
    try:
        lo, hi = (int(x) for x in text.split(":"))
    except ValueError:
        raise AgentxError(f"want LO:HI, got {text!r}", "token_range") from None
    if not 0 <= lo < hi:
        raise AgentxError(f"want 0 <= LO < HI, got {text!r}", "token_range")
    return lo, hi


@dataclass(frozen=True)
class ContentConfig:
    seed: int = option(0, "Seed of the content.")
    token_range: tuple[int, int] = option(DEFAULT_TOKEN_RANGE, cli=False)  # the CLI's --token-range LO:HI
    token_scale: int = option(1, "Render each hash block as block/K tokens (tiny models).", min=1)

    def __post_init__(self):
        check_bounds(self)


class PromptBuilder:
    """Renders the token ids of a request; one per run (cheap to build)."""

    def __init__(self, cfg: ContentConfig):
        self.cfg = cfg
        self.lo = np.uint64(cfg.token_range[0])
        self.span = np.uint64(cfg.token_range[1] - cfg.token_range[0])
        self._scope_keys: dict[str, np.uint64] = {}
        self.field = len(str(cfg.token_range[1] - 1)) + 1  # bytes per token in text(): a comma, digits
        self._table = self._text_table()  # fixed-width text of every id in the range

    def block_tokens(self, session: Session) -> int:
        return max(1, session.block_size // self.cfg.token_scale)

    def isl(self, session: Session, request: Request) -> int:
        return max(1, round(session.replay_isl(request) / self.cfg.token_scale))

    def osl(self, request: Request) -> int:
        return max(1, round(request.osl / self.cfg.token_scale))

    def system_tokens(self, session: Session) -> int:
        """The system prompt and tool definitions of the session (the chat wire's system message)."""
        return round(((session.system_tokens or 0) + (session.tool_tokens or 0)) / self.cfg.token_scale)

    def scope_key(self, session: Session) -> np.uint64:
        """The key of the session's hash-id space (per session, or one for global ids)."""
        scope = session.id if session.hash_id_scope == "local" else "<global>"
        key = self._scope_keys.get(scope)
        if key is None:
            key = self._scope_keys[scope] = np.uint64(key64("blocks", self.cfg.seed, scope))
        return key

    def _tokens(self, keys: np.ndarray, width: int) -> np.ndarray:
        cols = np.arange(width, dtype=np.uint64) * _G
        raw = mix64(keys[:, None] ^ cols[None, :])
        return (raw % self.span + self.lo).ravel()

    def prompt(self, session: Session, request: Request, request_key: int, marker: int, start: int = 0,
               end: int | None = None) -> np.ndarray:
        """Token ids (int64) of the request: hash blocks, then an unshared tail, with the tree's
        marker over the leading tokens; exactly `isl()` long. With `start` / `end`, only the
        tokens of those positions (the blocks outside them are not generated)."""
        isl, width = self.isl(session, request), self.block_tokens(session)
        end = isl if end is None else min(end, isl)
        n_ids = len(request.hash_ids)
        first, last = min(start // width, n_ids), min(-(-end // width), n_ids)
        ids = request.hash_ids[first:last].astype(np.uint64)
        out = self._tokens(mix64(ids ^ self.scope_key(session)), width)[: max(0, end - first * width)]
        tail = isl - n_ids * width
        if tail > 0 and end > n_ids * width:
            tail_keys = np.uint64(request_key) + np.arange(-(-tail // width), dtype=np.uint64)
            out = np.concatenate([out, self._tokens(mix64(tail_keys), width)[: end - n_ids * width]])
        out = out.astype(np.int64)
        if first == 0:
            m = min(MARKER_TOKENS, len(out))
            out[:m] = self._tokens(mix64(np.array([marker], dtype=np.uint64)), MARKER_TOKENS)[:m]
        return out[start - first * width:]

    def text(self, tokens: np.ndarray) -> memoryview:
        """Token ids as JSON array items, each a comma and the id right-aligned in a fixed
        width (',  123,45678'; drop the first byte and bracket it for an array): one gather from
        a table of every id's text, and fixed widths let a text be cut at any token."""
        lo = self.cfg.token_range[0]
        return memoryview(np.take(self._table, tokens - lo if lo else tokens).view(np.uint8))

    def _text_table(self) -> np.ndarray:
        lo, hi = self.cfg.token_range
        w = self.field - 1
        ids = np.arange(lo, hi, dtype=np.int64)
        powers = 10 ** np.arange(w - 1, -1, -1, dtype=np.int64)
        chars = ((ids[:, None] // powers[None, :]) % 10 + 48).astype(np.uint8)
        chars[(ids[:, None] < powers[None, :]) & (powers[None, :] > 1)] = 32  # leading zeros -> spaces
        table = np.empty((hi - lo, w + 1), dtype=np.uint8)
        table[:, 0] = 44
        table[:, 1:] = chars
        return table.view(f"V{w + 1}").ravel()  # one opaque item of w + 1 bytes per id
