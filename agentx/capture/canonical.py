"""The canonical text of a recorded prompt: what the anonymizer tokenizes and hashes.

`{"tools":[...],"system":...,"messages":[m1,m2,...]}` in that order (the order a model reads
them), each value as compact JSON with sorted keys and the volatile keys removed (`cache_control`
markers and thinking `signature`s change between resends of the same content). A turn that
appends messages therefore extends the previous turn's text up to its closing `]}`, which is
what prefix reuse and incremental tokenization rely on. A Completions prompt is its own text.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

VOLATILE_KEYS = frozenset({"cache_control", "signature"})


def _strip(value):
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k not in VOLATILE_KEYS}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def _json(value) -> str:
    return json.dumps(_strip(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


@dataclass(frozen=True)
class Prompt:
    tools: str  # canonical JSON of the tools ("" for a Completions prompt)
    system: str
    messages: tuple[str, ...]
    input_types: tuple[str, ...]  # content types of the turn's new input (after the last answer)
    conversation: str  # system + first message: the same in every turn of one conversation
    text: str | None = None  # a Completions prompt given as text
    token_ids: tuple[int, ...] | None = None  # a Completions prompt given as token ids

    def canonical(self) -> str:
        if self.text is not None:
            return self.text
        return '{"tools":' + self.tools + ',"system":' + self.system + ',"messages":[' + ",".join(self.messages) + "]}"


def _content_types(message: dict) -> list[str]:
    if message.get("role") == "tool":
        return ["tool_result"]
    content = message.get("content")
    if isinstance(content, list):
        types = [p.get("type", "text") for p in content if isinstance(p, dict)]
        return ["text" if t in ("input_text", "output_text") else t for t in types]
    return ["text"] if content else []


def _new_input_types(messages: list) -> tuple[str, ...]:
    last_answer = max((i for i, m in enumerate(messages) if isinstance(m, dict) and m.get("role") == "assistant"),
                      default=-1)
    types = {t for m in messages[last_answer + 1:] if isinstance(m, dict) for t in _content_types(m)}
    if any(isinstance(m, dict) and m.get("tool_calls") for m in messages[last_answer + 1:]):
        types.add("tool_use")
    return tuple(sorted(types))


def prompt_of(api: str, body: dict) -> Prompt:
    """The canonical prompt of a request body of `api` (messages, chat or completions)."""
    if api == "completions":
        prompt = body.get("prompt")
        if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], (str, list)):
            prompt = prompt[0]  # a batch of one
        if isinstance(prompt, list) and all(isinstance(t, int) for t in prompt):
            return Prompt("", "", (), ("text",), "", token_ids=tuple(prompt))
        text = prompt if isinstance(prompt, str) else _json(prompt)
        return Prompt("", "", (), ("text",), text[:256], text=text)
    messages = body.get("messages") or []
    if api == "messages":
        system = body.get("system") or ""
    else:  # OpenAI chat: leading system / developer messages are the system prompt
        lead = 0
        while lead < len(messages) and isinstance(messages[lead], dict) and \
                messages[lead].get("role") in ("system", "developer"):
            lead += 1
        system, messages = messages[:lead], messages[lead:]
    system_json = _json(system)
    encoded = tuple(_json(m) for m in messages)
    return Prompt(_json(body.get("tools") or []), system_json, encoded, _new_input_types(messages),
                  system_json + (encoded[0] if encoded else ""))
