"""Reassemble a recorded response (streamed SSE or one JSON body) into one answer.

Handles the Anthropic Messages API and OpenAI's Chat Completions and Completions. Stop reasons
are written in Anthropic's words (`end_turn`, `tool_use`, `max_tokens`, as in WEKA traces):
OpenAI's `stop`, `tool_calls` and `length` map to them.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

OPENAI_STOP = {"stop": "end_turn", "tool_calls": "tool_use", "function_call": "tool_use", "length": "max_tokens"}


@dataclass
class Answer:
    model: str | None = None
    text: str = ""
    thinking: str = ""
    tool_calls: list[dict] = field(default_factory=list)  # {"id", "name", "arguments"}
    output_types: list[str] = field(default_factory=list)
    stop: str | None = None
    input_tokens: int | None = None  # the whole prompt, cached tokens included
    output_tokens: int | None = None
    cached_tokens: int | None = None
    complete: bool = False  # the response reached its end event ([DONE], message_stop, a full body)
    first_token_offset: int | None = None  # byte offset of the first content event (streams)

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @staticmethod
    def from_json(text: str) -> "Answer":
        return Answer(**json.loads(text))

    def _type(self, kind: str) -> None:
        if kind not in self.output_types:
            self.output_types.append(kind)


def sse_events(body: bytes):
    """(byte offset, event name, data text) of each SSE event."""
    offset = 0
    body = body.replace(b"\r\n", b"\n")
    for block in body.split(b"\n\n"):
        name, data = None, []
        for line in block.split(b"\n"):
            if line.startswith(b"event:"):
                name = line[6:].strip().decode("utf-8", "replace")
            elif line.startswith(b"data:"):
                data.append(line[5:].removeprefix(b" ").decode("utf-8", "replace"))
        if data:
            yield offset, name, "\n".join(data)
        offset += len(block) + 2


def reassemble(api: str, body: bytes, streamed: bool) -> Answer:
    """The answer in a response body of `api` (messages, chat or completions)."""
    answer = Answer()
    if streamed:
        feed = _anthropic_event if api == "messages" else _openai_chunk
        for offset, _, data in sse_events(body):
            if data == "[DONE]":
                answer.complete = True
                continue
            try:
                obj = json.loads(data)
            except ValueError:
                continue  # a malformed event: the rest of the answer still counts
            if isinstance(obj, dict) and feed(answer, obj) and answer.first_token_offset is None:
                answer.first_token_offset = offset
    else:
        try:
            obj = json.loads(body)
        except ValueError:
            return answer
        if isinstance(obj, dict):
            (_anthropic_body if api == "messages" else _openai_body)(answer, obj)
    answer.output_types.sort()
    return answer


def _anthropic_usage(answer: Answer, usage: dict | None) -> None:
    if not usage:
        return
    if "input_tokens" in usage:
        cached = usage.get("cache_read_input_tokens") or 0
        answer.cached_tokens = cached
        answer.input_tokens = usage["input_tokens"] + cached + (usage.get("cache_creation_input_tokens") or 0)
    if "output_tokens" in usage:
        answer.output_tokens = usage["output_tokens"]


def _anthropic_block(answer: Answer, block: dict) -> None:
    kind = block.get("type", "text")
    answer._type("thinking" if kind == "redacted_thinking" else kind)
    if kind == "text":
        answer.text += block.get("text", "")
    elif kind == "thinking":
        answer.thinking += block.get("thinking", "")
    elif kind in ("tool_use", "server_tool_use"):
        args = block.get("input")
        answer.tool_calls.append({"id": block.get("id"), "name": block.get("name"),
                                  "arguments": json.dumps(args) if args else ""})


def _anthropic_event(answer: Answer, event: dict) -> bool:
    """Fold one streamed event in; true when it carried content."""
    kind = event.get("type")
    if kind == "message_start":
        message = event.get("message") or {}
        answer.model = message.get("model")
        _anthropic_usage(answer, message.get("usage"))
    elif kind == "content_block_start":
        block = dict(event.get("content_block") or {})
        block.pop("input", None)  # streamed tool input arrives as deltas
        _anthropic_block(answer, block)
    elif kind == "content_block_delta":
        delta = event.get("delta") or {}
        dk = delta.get("type")
        if dk == "text_delta":
            answer.text += delta.get("text", "")
        elif dk == "thinking_delta":
            answer.thinking += delta.get("thinking", "")
        elif dk == "input_json_delta" and answer.tool_calls:
            answer.tool_calls[-1]["arguments"] += delta.get("partial_json", "")
        return dk in ("text_delta", "thinking_delta", "input_json_delta")
    elif kind == "message_delta":
        answer.stop = (event.get("delta") or {}).get("stop_reason") or answer.stop
        _anthropic_usage(answer, event.get("usage"))
    elif kind == "message_stop":
        answer.complete = True
    return False


def _anthropic_body(answer: Answer, body: dict) -> None:
    answer.model = body.get("model")
    for block in body.get("content") or []:
        if isinstance(block, dict):
            _anthropic_block(answer, block)
    answer.stop = body.get("stop_reason")
    _anthropic_usage(answer, body.get("usage"))
    answer.complete = body.get("type") == "message"


def _openai_usage(answer: Answer, usage: dict | None) -> None:
    if not usage:
        return
    answer.input_tokens = usage.get("prompt_tokens")
    answer.output_tokens = usage.get("completion_tokens")
    details = usage.get("prompt_tokens_details") or {}
    answer.cached_tokens = details.get("cached_tokens")


def _openai_message(answer: Answer, part: dict) -> bool:
    """Fold a chat delta or message (or a completion choice) in; true when it carried content."""
    carried = False
    text = part.get("content") if "content" in part else part.get("text")
    if text:
        answer.text += text
        answer._type("text")
        carried = True
    reasoning = part.get("reasoning_content") or part.get("reasoning")
    if isinstance(reasoning, str) and reasoning:
        answer.thinking += reasoning
        answer._type("thinking")
        carried = True
    for i, call in enumerate(part.get("tool_calls") or []):
        index = call.get("index", i)
        while len(answer.tool_calls) <= index:
            answer.tool_calls.append({"id": None, "name": None, "arguments": ""})
        slot, fn = answer.tool_calls[index], call.get("function") or {}
        slot["id"] = call.get("id") or slot["id"]
        slot["name"] = fn.get("name") or slot["name"]
        slot["arguments"] += fn.get("arguments") or ""
        answer._type("tool_use")
        carried = True
    return carried


def _openai_chunk(answer: Answer, chunk: dict) -> bool:
    answer.model = chunk.get("model") or answer.model
    _openai_usage(answer, chunk.get("usage"))
    carried = False
    for choice in chunk.get("choices") or []:
        carried |= _openai_message(answer, choice.get("delta") or choice)
        if choice.get("finish_reason"):
            answer.stop = OPENAI_STOP.get(choice["finish_reason"], choice["finish_reason"])
    return carried


def _openai_body(answer: Answer, body: dict) -> None:
    answer.model = body.get("model")
    for choice in body.get("choices") or []:
        _openai_message(answer, choice.get("message") or choice)
        if choice.get("finish_reason"):
            answer.stop = OPENAI_STOP.get(choice["finish_reason"], choice["finish_reason"])
    _openai_usage(answer, body.get("usage"))
    answer.complete = "choices" in body
