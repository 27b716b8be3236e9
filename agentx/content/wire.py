"""Request bodies on the wire: `tokens` (/v1/completions, prompt = token ids) or `chat`
(/v1/chat/completions, messages rendered to text by a tokenizer)."""

from __future__ import annotations

from dataclasses import dataclass

import msgspec
import numpy as np

from agentx.errors import AgentxError

WIRE_MODES = ("tokens", "chat")


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
            raise AgentxError(f"--wire: want one of {', '.join(WIRE_MODES)}, got {wire!r}")
        self.wire, self.decoder, self.model = wire, decoder, model
        self.path = "/v1/completions" if wire == "tokens" else "/v1/chat/completions"
        self.ignore_eos = ignore_eos

    def _start(self, max_tokens: int) -> bytes:
        head = {"model": self.model, "max_tokens": max_tokens, "stream": True,
                "stream_options": {"include_usage": True}}
        if self.ignore_eos:
            head.update(ignore_eos=True, min_tokens=max_tokens)
        return msgspec.json.encode(head)[:-1]

    def tokens_body(self, prompt_text: memoryview, max_tokens: int) -> bytes:
        """/v1/completions with the prompt as token ids (`PromptBuilder.prompt_text` output:
        comma-terminated fixed-width ids), in one copy."""
        return b"".join((self._start(max_tokens), b',"prompt":[', prompt_text[:-1], b"]}"))

    def chat_body(self, prompt: np.ndarray, max_tokens: int, segments: list[Segment] | None = None) -> bytes:
        start = self._start(max_tokens)
        segments = segments or [Segment("user", 0, len(prompt))]
        messages = [{"role": s.role, "content": self.decoder(prompt[s.start:s.end].tolist())} for s in segments]
        return start + b',"messages":' + msgspec.json.encode(messages) + b"}"
