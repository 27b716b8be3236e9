"""OpenAI-compatible request bodies (validated with msgspec) and response bodies."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

PositiveInt = Annotated[int, msgspec.Meta(ge=1)]
NonNegativeInt = Annotated[int, msgspec.Meta(ge=0)]


class StreamOptions(msgspec.Struct):
    include_usage: bool = False


class _Common(msgspec.Struct, kw_only=True):
    model: str | None = None
    max_tokens: PositiveInt | None = None
    min_tokens: NonNegativeInt = 0
    ignore_eos: bool = False
    stream: bool = False
    stream_options: StreamOptions | None = None


class CompletionRequest(_Common, kw_only=True):
    prompt: str | list[int]


class ChatMessage(msgspec.Struct, kw_only=True):
    role: str
    content: str | list[dict[str, Any]] | None = None
    tool_calls: list[dict[str, Any]] | None = None


class ChatRequest(_Common, kw_only=True):
    messages: Annotated[list[ChatMessage], msgspec.Meta(min_length=1)]
    max_completion_tokens: PositiveInt | None = None
    tools: list[dict[str, Any]] | None = None


_decoders = {cls: msgspec.json.Decoder(cls) for cls in (CompletionRequest, ChatRequest)}
encode = msgspec.json.encode


class BadRequest(Exception):
    """A request the server refuses; `status` and an OpenAI-style error body."""

    def __init__(self, message: str, status: int = 400, kind: str = "BadRequestError", param: str | None = None):
        super().__init__(message)
        self.status, self.kind, self.param = status, kind, param

    def body(self) -> bytes:
        return error_body(str(self), self.kind, self.status, self.param)


def error_body(message: str, kind: str, code: int, param: str | None = None) -> bytes:
    return encode({"error": {"message": message, "type": kind, "param": param, "code": code}})


def parse(cls, body: bytes):
    try:
        return _decoders[cls].decode(body)
    except msgspec.ValidationError as e:
        raise BadRequest(f"invalid request: {e}") from None
    except msgspec.DecodeError as e:
        raise BadRequest(f"invalid JSON body: {e}") from None


def usage(prompt_tokens: int, completion_tokens: int, cached_tokens: int) -> dict:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "prompt_tokens_details": {"cached_tokens": cached_tokens},
    }


class ResponseShape:
    """Bodies and SSE frames of one response; `chat` picks the chat.completion formats."""

    def __init__(self, rid: str, model: str, created: int, chat: bool):
        self.rid, self.model, self.created, self.chat = rid, model, created, chat
        head = {"id": rid, "object": "chat.completion.chunk" if chat else "text_completion",
                "created": created, "model": model}
        # every token frame is prefix + JSON string + suffix, built once per response
        encoded = encode(head)[:-1]
        if chat:
            self._prefix = b"data: " + encoded + b',"choices":[{"index":0,"delta":{"content":'
            self._suffix = b'},"logprobs":null,"finish_reason":null}]}\n\n'
        else:
            self._prefix = b"data: " + encoded + b',"choices":[{"index":0,"text":'
            self._suffix = b',"logprobs":null,"finish_reason":null}]}\n\n'
        self._head = head

    def token_frame(self, json_text: bytes) -> bytes:
        """The frame of one token whose text is already JSON-encoded."""
        return self._prefix + json_text + self._suffix

    def first_frame(self) -> bytes:
        """Chat streams open with the assistant role, as OpenAI's and vLLM's do."""
        if not self.chat:
            return b""
        choice = {"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None, "finish_reason": None}
        return self._frame({**self._head, "choices": [choice]})

    def finish_frame(self, reason: str) -> bytes:
        choice = {"index": 0, "logprobs": None, "finish_reason": reason}
        choice.update({"delta": {}} if self.chat else {"text": ""})
        return self._frame({**self._head, "choices": [choice]})

    def usage_frame(self, u: dict) -> bytes:
        return self._frame({**self._head, "choices": [], "usage": u})

    @staticmethod
    def _frame(obj) -> bytes:
        return b"data: " + encode(obj) + b"\n\n"

    def full_body(self, text: str, reason: str, u: dict) -> bytes:
        if self.chat:
            choice = {"index": 0, "message": {"role": "assistant", "content": text},
                      "logprobs": None, "finish_reason": reason}
            obj = "chat.completion"
        else:
            choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": reason}
            obj = "text_completion"
        return encode({**self._head, "object": obj, "choices": [choice], "usage": u})


DONE = b"data: [DONE]\n\n"
