"""Request bodies on the wire: `tokens` (/v1/completions, prompt = token ids) or `chat`
(/v1/chat/completions, messages rendered to text by a tokenizer)."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable

import msgspec
import numpy as np

from agentx.common import shared_prefix
from agentx.errors import AgentxError

WIRE_MODES = ("tokens", "chat")
_WIDE = 9_876_543_210  # a 10-digit stand-in for max_tokens in a head template


def load_decoder(path: str | None):
    """ids -> text: a local tokenizer.json (Hugging Face `tokenizers`), or the simulated
    engine's built-in tokenizer (exact: the sim re-tokenizes chat content to the same ids)."""
    if path is None:
        from agentx.engine.tokenizer import Tokenizer

        return Tokenizer(1 << 31).decode
    from tokenizers import Tokenizer as HFTokenizer

    try:
        tok = HFTokenizer.from_file(path)
    except Exception as e:  # the library raises plain Exceptions for bad files
        raise AgentxError(f"{path}: not a tokenizer.json ({e})") from None
    return lambda ids: tok.decode(list(ids), skip_special_tokens=False)


@dataclass(frozen=True)
class Segment:
    role: str
    start: int
    end: int


def chat_segments(isl: int, system: int, history: list[tuple[int, int]]) -> list[Segment]:
    """Split a prompt of `isl` tokens into messages: a system segment of `system` tokens, then
    user / assistant segments at the stream's earlier turns (each earlier request's ISL ends a
    user segment, its OSL is the assistant's answer); the rest is the last user message."""
    out, pos = [], 0
    if system > 0:
        out.append(Segment("system", 0, min(system, isl)))
        pos = out[-1].end
    for prev_isl, prev_osl in history:
        for role, end in (("user", prev_isl), ("assistant", prev_isl + prev_osl)):
            end = min(end, isl)
            if end > pos:
                out.append(Segment(role, pos, end))
                pos = end
    if pos < isl or not out or out[-1].role != "user":
        out.append(Segment("user", pos, isl))
    return out


class BodyBuilder:
    """Bytes of one request body; the static parts are encoded once."""

    def __init__(self, model: str, wire: str, decoder=None, ignore_eos: bool = True):
        if wire not in WIRE_MODES:
            raise AgentxError(f"want one of {', '.join(WIRE_MODES)}, got {wire!r}", "wire")
        self.wire, self.decoder, self.model = wire, decoder, model
        self.path = "/v1/completions" if wire == "tokens" else "/v1/chat/completions"
        self.ignore_eos = ignore_eos
        self._tokens_head = self._start(_WIDE) + b',"prompt":'  # with a stand-in max_tokens

    def _start(self, max_tokens: int) -> bytes:
        head = {"model": self.model, "max_tokens": max_tokens, "stream": True,
                "stream_options": {"include_usage": True}}
        if self.ignore_eos:
            head.update(ignore_eos=True, min_tokens=max_tokens)
        return msgspec.json.encode(head)[:-1]

    def tokens_head(self, max_tokens: int) -> bytes:
        """/v1/completions up to its prompt: `{..., "prompt":`, of one length for any
        `max_tokens` (numbers space-padded: valid JSON) so bodies can be rewritten in place."""
        return self._tokens_head.replace(b"%d" % _WIDE, b"%10d" % max_tokens)

    def chat_body(self, segments: list[Segment], texts: list[str], max_tokens: int) -> bytes:
        messages = [{"role": s.role, "content": text} for s, text in zip(segments, texts)]
        return self._start(max_tokens) + b',"messages":' + msgspec.json.encode(messages) + b"}"


class TokensText:
    """`tokens` wire bodies, rewritten in place per stream. A stream's next request usually
    extends its previous one, so its body is the previous body's buffer with the head and the
    new blocks written over it: no generation of the shared blocks and no copy of them, and no
    fresh memory (on a VM, first touches of fresh pages cost more than the copy itself). A buffer
    still referenced elsewhere (a body being sent) is never rewritten: the body goes to a new
    one. `forget(stream_key)` drops a stream's buffer."""

    def __init__(self, prompts, bodies: BodyBuilder):
        self.prompts, self.bodies = prompts, bodies
        self._streams: dict = {}  # stream key -> (hash ids of its full blocks, buffer of its last body)

    def body(self, session, request, request_key: int, marker: int, max_tokens: int,
             stream_key=None) -> tuple[memoryview, int]:
        """(body, ISL) of a request: the same tokens as `PromptBuilder.prompt()`. The body is
        valid until the stream's next `body()` call."""
        p = self.prompts
        isl, width = p.isl(session, request), p.block_tokens(session)
        ids = request.hash_ids
        n_full = min(len(ids), isl // width)
        head = self.bodies.tokens_head(max_tokens)
        size = len(head) + isl * p.field + 2  # head, the items (the first one's comma is '['), ']}'
        prev_ids, buf = self._streams.get(stream_key, (None, None)) if stream_key is not None else (None, None)
        k = shared_prefix(prev_ids, ids[:n_full]) if prev_ids is not None else 0
        keep = len(head) + k * width * p.field
        if buf is None or len(buf) < size or _exported(buf):
            grown = bytearray(size + size // 4)  # room for the next turns
            grown[:keep] = buf[:keep] if k else b""
            buf = grown
        new = p.text(p.prompt(session, request, request_key, marker, start=k * width))
        buf[: len(head)] = head
        buf[keep: keep + len(new)] = new
        buf[len(head)] = 91  # '[' over the first item's comma
        buf[size - 2: size] = b"]}"
        if stream_key is not None:
            self._streams[stream_key] = (ids[:n_full], buf)
        return memoryview(buf)[:size], isl

    def forget(self, stream_key) -> None:
        self._streams.pop(stream_key, None)


def _exported(buf: bytearray) -> bool:
    """Whether a view of `buf` is alive (a bytearray with views cannot be resized)."""
    try:
        buf.append(buf.pop())  # within its allocation: no copy
    except BufferError:
        return True
    return False


class ChatText:
    """Chat message text, block by block: the text of each full hash block (64 tokens in the
    trace) is decoded once and cached (least recently used blocks go past the byte budget), so
    a turn that resends its history decodes only the blocks it has not rendered before, plus
    the pieces of blocks that segment boundaries cut (at most one block at each end). A message
    is the concatenation of its blocks' texts (SPEC §2)."""

    def __init__(self, prompts, decoder, budget_bytes: int = 256 << 20):
        self.prompts, self.decoder, self.budget = prompts, decoder, budget_bytes
        self._texts: OrderedDict = OrderedDict()  # (scope, hash id, marker) -> text
        self.size = 0
        self.decoded_tokens = 0

    def _decode(self, tokens: np.ndarray) -> str:
        self.decoded_tokens += len(tokens)
        return self.decoder(tokens.tolist())

    def _block(self, key, tokens_of: Callable[[], np.ndarray]) -> str:
        text = self._texts.get(key)
        if text is None:
            text = self._texts[key] = self._decode(tokens_of())
            self.size += len(text)
            while self.size > self.budget and len(self._texts) > 1:
                self.size -= len(self._texts.popitem(last=False)[1])
        else:
            self._texts.move_to_end(key)
        return text

    def messages(self, session, request, request_key: int, marker: int, segments: list[Segment]) -> list[str]:
        """The text of each segment of the request's prompt."""
        p = self.prompts
        width, isl, ids = p.block_tokens(session), p.isl(session, request), request.hash_ids
        scope = int(p.scope_key(session))

        def tokens(a: int, b: int) -> np.ndarray:
            return p.prompt(session, request, request_key, marker, a, b)

        out = []
        for seg in segments:
            parts, pos = [], seg.start
            while pos < seg.end:
                i = pos // width
                block_end = (i + 1) * width
                if pos == i * width and block_end <= min(seg.end, isl) and i < len(ids):
                    key = (scope, int(ids[i]), marker if i == 0 else 0)  # block 0 carries the marker
                    parts.append(self._block(key, lambda a=pos, b=block_end: tokens(a, b)))
                    pos = block_end
                else:  # a piece of a block (a segment boundary) or the request's own tail
                    stop = min(seg.end, block_end if i < len(ids) else seg.end)
                    parts.append(self._decode(tokens(pos, stop)))
                    pos = stop
            out.append("".join(parts))
        return out
