"""OpenAI-compatible request bodies (validated with msgspec) and response bodies."""

from __future__ import annotations

from functools import cache
from typing import Annotated, Any

import msgspec

from agentx.engine.hints import Hints

PositiveInt = Annotated[int, msgspec.Meta(ge=1)]
NonNegativeInt = Annotated[int, msgspec.Meta(ge=0)]


class StreamOptions(msgspec.Struct):
    include_usage: bool = False


class _Sampling(msgspec.Struct, kw_only=True):
    """Sampling parameters: the sim has no sampling, but refuses values no engine would take."""

    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None


class _Common(_Sampling, kw_only=True):
    model: str | None = None
    max_tokens: PositiveInt | None = None
    min_tokens: NonNegativeInt = 0
    ignore_eos: bool = False
    stream: bool = False
    stream_options: StreamOptions | None = None
    n: int = 1
    agentx_hints: Hints | None = None  # harness hints (SPEC §2), what the KV policy reads


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
    tool_choice: str | dict[str, Any] | None = None


class AnthropicMessage(msgspec.Struct, kw_only=True):
    role: str
    content: str | list[dict[str, Any]]


class MessagesRequest(_Sampling, kw_only=True):
    """Anthropic Messages API; `min_tokens` and `ignore_eos` are the sim's extensions."""

    model: str | None = None
    max_tokens: PositiveInt
    messages: Annotated[list[AnthropicMessage], msgspec.Meta(min_length=1)]
    system: str | list[dict[str, Any]] | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: dict[str, Any] | None = None
    stream: bool = False
    min_tokens: NonNegativeInt = 0
    ignore_eos: bool = False
    agentx_hints: Hints | None = None


_decoders = {cls: msgspec.json.Decoder(cls) for cls in (CompletionRequest, ChatRequest, MessagesRequest)}
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


ANTHROPIC_ERROR_TYPES = {404: "not_found_error", 413: "request_too_large"}


def anthropic_error_body(message: str, code: int) -> bytes:
    kind = ANTHROPIC_ERROR_TYPES.get(code, "invalid_request_error" if code < 500 else "api_error")
    return encode({"type": "error", "error": {"type": kind, "message": message}})


def parse(cls, body: bytes):
    """Decode and check a request body; anything the sim cannot honour is a BadRequest (400)."""
    try:
        req = _decoders[cls].decode(body)
    except msgspec.ValidationError as e:
        raise BadRequest(f"invalid request: {e}") from None
    except msgspec.DecodeError as e:
        raise BadRequest(f"invalid JSON body: {e}") from None
    except UnicodeDecodeError:
        raise BadRequest("invalid JSON body: not valid UTF-8") from None
    except RecursionError:
        raise BadRequest("invalid JSON body: nested too deeply") from None
    _check_sampling(req)
    if cls is ChatRequest:
        for i, m in enumerate(req.messages):
            _check_content(m.content, CHAT_PARTS, f"messages[{i}].content")
    elif cls is MessagesRequest:
        for i, m in enumerate(req.messages):
            _check_content(m.content, ANTHROPIC_BLOCKS, f"messages[{i}].content")
        _check_content(req.system, {"text"}, "system")
    return req


def parse_completion(body: bytes, vocab: int) -> CompletionRequest:
    """`parse(CompletionRequest, body)`, and a prompt of token ids checked against the vocabulary
    (0 to vocab - 1) as it is decoded (msgspec's bound, where a Python pass over 100k ids cost
    1.2 ms). A body the bounded decoder refuses is parsed again as before, so every error, and its
    order, is as it was: the schema's, then an id out of the vocabulary named."""
    try:
        req = _bounded_decoder(vocab).decode(body)
    except Exception:  # (any error: the plain parse reports it as it always has)
        req = parse(CompletionRequest, body)
        if not isinstance(req.prompt, str):
            bad = next((t for t in req.prompt if not 0 <= t < vocab), None)
            if bad is not None:
                raise BadRequest(f"Token id {bad} is out of vocabulary (valid ids are 0 to {vocab - 1})",
                                 param="prompt") from None
        return req
    _check_sampling(req)
    return req


@cache
def _bounded_decoder(vocab: int) -> msgspec.json.Decoder:
    token_id = Annotated[int, msgspec.Meta(ge=0, lt=vocab)]
    bounded = msgspec.defstruct("CompletionRequest", [("prompt", str | list[token_id])],
                                bases=(CompletionRequest,), kw_only=True, module=__name__)
    return msgspec.json.Decoder(bounded)


# Content part types each API defines; the sim renders text as text and the others as JSON.
CHAT_PARTS = {"text", "image_url", "input_audio", "file", "refusal"}
ANTHROPIC_BLOCKS = {"text", "image", "document", "tool_use", "tool_result", "thinking", "redacted_thinking"}


def _check_content(content, known: set[str], where: str) -> None:
    if not isinstance(content, list):
        return  # a string or null: already typed
    for i, part in enumerate(content):
        kind = part.get("type")
        if kind not in known:
            raise BadRequest(f"{where}[{i}].type: unknown content type {kind!r} (known: {', '.join(sorted(known))})",
                             param=f"{where}[{i}].type")
        if kind == "text" and not isinstance(part.get("text"), str):
            raise BadRequest(f"{where}[{i}].text: expected a string", param=f"{where}[{i}].text")


def _check_sampling(req) -> None:
    """vLLM's checks, for parameters the sim accepts and ignores; `n` must be 1 (one choice)."""
    problems = [
        (getattr(req, "n", 1) != 1, "n", f"n = {getattr(req, 'n', 1)} is not supported: the simulated engine "
                                         "returns exactly one choice"),
        (req.temperature is not None and not req.temperature >= 0, "temperature",
         f"temperature must be non-negative, got {req.temperature}"),
        (req.top_p is not None and not 0 < req.top_p <= 1, "top_p", f"top_p must be in (0, 1], got {req.top_p}"),
        (req.top_k is not None and req.top_k < -1, "top_k", f"top_k must be -1 (disable), 0 or positive, got {req.top_k}"),
    ]
    for bad, param, message in problems:
        if bad:
            raise BadRequest(message, param=param)


EXTENSION = "agentx_sim"  # the sim's extension object (modeled timings) in a final chunk or body


def with_extension(body: bytes, modeled: dict) -> bytes:
    """A JSON object body with the sim's extension object added as its last member."""
    return body[:-1] + b',"' + EXTENSION.encode() + b'":' + encode(modeled) + b"}"


def usage(prompt_tokens: int, completion_tokens: int, cached_tokens: int) -> dict:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "prompt_tokens_details": {"cached_tokens": cached_tokens},
    }


def forced_tool(tools: list[dict] | None, choice) -> str | None:
    """The tool the request forces (OpenAI or Anthropic `tool_choice`), else None.

    Tools must be well formed and a forced tool must be among them (400 otherwise, as vLLM)."""
    names = [_tool_name(t, i) for i, t in enumerate(tools or [])]
    if choice is None:
        return None
    if isinstance(choice, str):
        choice = {"type": choice}
    kind = choice.get("type")
    if kind in ("none", "auto"):
        return None
    if kind in ("function", "tool"):  # OpenAI {"type": "function", "function": {"name"}}, Anthropic {"type": "tool", "name"}
        named = choice.get("function") if kind == "function" else choice
        name = named.get("name") if isinstance(named, dict) else None
        if not isinstance(name, str):
            raise BadRequest("tool_choice: the forced tool's name must be a string", param="tool_choice")
        if name not in names:
            raise BadRequest(f"tool_choice: tool {name!r} is not among the request's tools", param="tool_choice")
        return name
    if kind in ("any", "required"):
        if not names:
            raise BadRequest(f"tool_choice {kind!r} needs at least one tool in `tools`", param="tool_choice")
        return names[0]
    raise BadRequest(f"tool_choice: unknown type {kind!r}", param="tool_choice")


def _tool_name(tool: dict, i: int) -> str:
    """A tool's name: OpenAI's `function.name` or Anthropic's `name`."""
    named = tool.get("function") if "function" in tool else tool
    name = named.get("name") if isinstance(named, dict) else None
    if not isinstance(name, str):
        raise BadRequest(f"tools[{i}]: a tool needs a name (a string)", param=f"tools[{i}]")
    return name


# A forced tool call's arguments are {"text": "<the answer's words>"}, streamed as fragments.
ARGS_OPEN, ARGS_CLOSE = '{"text": "', '"}'


def _frame(obj) -> bytes:
    return b"data: " + encode(obj) + b"\n\n"


class OpenAIShape:
    """Bodies and SSE frames of one completions or chat.completions response.

    Every token frame is prefix + JSON string + suffix, built once per response. With a forced
    `tool`, chat answers are one tool call whose arguments are streamed token by token.
    """

    def __init__(self, rid: str, model: str, created: int, chat: bool, tool: str | None = None,
                 reasoning_field: str = "reasoning_content"):
        self.rid, self.chat, self.tool = rid, chat, tool if chat else None
        self.reasoning_field = reasoning_field
        head = {"id": rid, "object": "chat.completion.chunk" if chat else "text_completion",
                "created": created, "model": model}
        self._head = head
        encoded = encode(head)[:-1]
        if self.tool:
            self._prefix = b"data: " + encoded + b',"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":'
            self._suffix = b'}}]},"logprobs":null,"finish_reason":null}]}\n\n'
        elif chat:
            self._prefix = b"data: " + encoded + b',"choices":[{"index":0,"delta":{"content":'
            self._suffix = b'},"logprobs":null,"finish_reason":null}]}\n\n'
            self._thinking = b"data: " + encoded + b',"choices":[{"index":0,"delta":{"' + reasoning_field.encode() + b'":'
        else:
            self._prefix = b"data: " + encoded + b',"choices":[{"index":0,"text":'
            self._suffix = b',"logprobs":null,"finish_reason":null}]}\n\n'

    usage = staticmethod(usage)

    def _reason(self, reason: str) -> str:
        return "tool_calls" if self.tool and reason == "stop" else reason

    def _call(self, arguments: str) -> dict:
        return {"id": f"call_{self._head['id']}", "type": "function",
                "function": {"name": self.tool, "arguments": arguments}}

    def token_frame(self, json_text: bytes) -> bytes:
        """The frame of one token whose text is already JSON-encoded."""
        return self._prefix + json_text + self._suffix

    def reasoning_frame(self, json_text: bytes) -> bytes:
        """The frame of one reasoning token (chat only, as vLLM's reasoning parsers stream it)."""
        return self._thinking + json_text + self._suffix

    def open(self, prompt_tokens: int, cached: int) -> bytes:
        """Chat streams open with the assistant role, as OpenAI's and vLLM's do."""
        if not self.chat:
            return b""
        delta = {"role": "assistant", "content": ""}
        if self.tool:
            delta = {"role": "assistant", "content": None, "tool_calls": [{"index": 0, **self._call(ARGS_OPEN)}]}
        return _frame({**self._head, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": None}]})

    def close(self, reason: str, u: dict, include_usage: bool, modeled: dict | None = None) -> bytes:
        """The last frames; `modeled` (the sim's timings) rides in the finish chunk as `agentx_sim`."""
        frames = []
        if self.tool:
            frames.append(self.token_frame(encode(ARGS_CLOSE)))
        choice = {"index": 0, "logprobs": None, "finish_reason": self._reason(reason)}
        choice.update({"delta": {}} if self.chat else {"text": ""})
        extension = {EXTENSION: modeled} if modeled is not None else {}
        frames.append(_frame({**self._head, "choices": [choice], **extension}))
        if include_usage:
            frames.append(_frame({**self._head, "choices": [], "usage": u}))
        frames.append(DONE)
        return b"".join(frames)

    def full_body(self, text: str, reason: str, u: dict, reasoning: str = "") -> bytes:
        if self.chat:
            message = {"role": "assistant", "content": text}
            if reasoning:
                message[self.reasoning_field] = reasoning
            if self.tool:
                message = {"role": "assistant", "content": None, "tool_calls": [self._call(ARGS_OPEN + text + ARGS_CLOSE)]}
            choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": self._reason(reason)}
            obj = "chat.completion"
        else:
            choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": reason}
            obj = "text_completion"
        return encode({**self._head, "object": obj, "choices": [choice], "usage": u})


def _event(name: str, obj) -> bytes:
    return b"event: " + name.encode() + b"\ndata: " + encode(obj) + b"\n\n"


class AnthropicShape:
    """Bodies and SSE events of one Anthropic Messages response (text, or one forced tool call)."""

    def __init__(self, rid: str, model: str, tool: str | None = None):
        self.rid, self.model, self.tool = rid, model, tool
        if tool:
            self._prefix = b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":'
        else:
            self._prefix = b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":'
        self._suffix = b"}}\n\n"

    def _reason(self, reason: str) -> str:
        if reason == "length":
            return "max_tokens"
        return "tool_use" if self.tool else "end_turn"

    def _block(self, text: str) -> dict:
        if self.tool:
            return {"type": "tool_use", "id": f"toolu_{self.rid}", "name": self.tool,
                    "input": msgspec.json.decode(text) if text else {}}
        return {"type": "text", "text": text}

    @staticmethod
    def usage(prompt_tokens: int, completion_tokens: int, cached: int) -> dict:
        return {"input_tokens": prompt_tokens - cached, "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": cached, "output_tokens": completion_tokens}

    def token_frame(self, json_text: bytes) -> bytes:
        return self._prefix + json_text + self._suffix

    def open(self, prompt_tokens: int, cached: int) -> bytes:
        message = {"id": self.rid, "type": "message", "role": "assistant", "model": self.model, "content": [],
                   "stop_reason": None, "stop_sequence": None, "usage": self.usage(prompt_tokens, 1, cached)}
        block = self._block("")
        frames = [_event("message_start", {"type": "message_start", "message": message}),
                  _event("content_block_start", {"type": "content_block_start", "index": 0, "content_block": block})]
        if self.tool:
            frames.append(self.token_frame(encode(ARGS_OPEN)))
        return b"".join(frames)

    def close(self, reason: str, u: dict, include_usage: bool, modeled: dict | None = None) -> bytes:
        frames = [self.token_frame(encode(ARGS_CLOSE))] if self.tool else []
        extension = {EXTENSION: modeled} if modeled is not None else {}
        frames += [
            _event("content_block_stop", {"type": "content_block_stop", "index": 0}),
            _event("message_delta", {"type": "message_delta",
                                     "delta": {"stop_reason": self._reason(reason), "stop_sequence": None},
                                     "usage": {"output_tokens": u["output_tokens"]}, **extension}),
            _event("message_stop", {"type": "message_stop"}),
        ]
        return b"".join(frames)

    def full_body(self, text: str, reason: str, u: dict) -> bytes:
        if self.tool:
            text = ARGS_OPEN + text + ARGS_CLOSE
        return encode({"id": self.rid, "type": "message", "role": "assistant", "model": self.model,
                       "content": [self._block(text)], "stop_reason": self._reason(reason),
                       "stop_sequence": None, "usage": u})


DONE = b"data: [DONE]\n\n"
