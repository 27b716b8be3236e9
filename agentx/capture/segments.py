"""A recorded prompt's segments: its input tokens, in order, by kind (SPEC §1, "Segments").

Each part of the canonical prompt (the tool definitions, the system prompt, every content block of
every message) is tokenized alone; the parts' kinds come from the message roles and block types of
the Anthropic Messages and OpenAI Chat shapes, a tool's class from its name. A message's own JSON
(its role and keys) counts to its last part, so a message keeps its lengths in every later turn;
the few tokens of punctuation between messages go to the prompt's last segment, so the lengths
always add up to the request's input tokens. Only kinds and lengths leave this module, never text.
"""

from __future__ import annotations

import re
from typing import Callable

from agentx.capture.canonical import _json
from agentx.traces.model import Segment

# A tool's class from its name (Claude Code's and Codex's tools, MCP-style names). First match wins.
_TOOL_CLASSES = (
    ("web", re.compile(r"web|fetch|browse|url|http", re.I)),
    ("edit", re.compile(r"edit|write|patch|replace|create|insert|notebook", re.I)),
    ("search", re.compile(r"grep|glob|search|find|^ls$|list|lsp", re.I)),
    ("read", re.compile(r"read|view|cat|open|get_file", re.I)),
    ("shell", re.compile(r"bash|shell|exec|command|terminal|run|powershell", re.I)),
)

_REASONING = frozenset({"thinking", "redacted_thinking", "reasoning"})


def tool_class(name: str | None) -> str | None:
    """read, search, edit, shell or web for a tool's name; None where the name says none of them."""
    if not name:
        return None
    return next((cls for cls, pattern in _TOOL_CLASSES if pattern.search(name)), None)


def _tool_names(messages: list) -> dict[str, str]:
    """Tool-call id -> tool name, over the conversation's assistant messages (both API shapes)."""
    names: dict[str, str] = {}
    for m in messages:
        if not isinstance(m, dict):
            continue
        for call in m.get("tool_calls") or []:
            if isinstance(call, dict):
                fn = call.get("function") if isinstance(call.get("function"), dict) else {}
                names[str(call.get("id"))] = str(fn.get("name") or call.get("name") or "")
        content = m.get("content")
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict) and block.get("type") == "tool_use":
                names[str(block.get("id"))] = str(block.get("name") or "")
    return names


def _parts(message: dict, names: dict[str, str]) -> list[tuple[str, str | None, object]]:
    """(kind, tool class, value to tokenize) for one message's content."""
    role = message.get("role")
    if role == "tool":
        return [("tool_result", tool_class(names.get(str(message.get("tool_call_id")))), message.get("content"))]
    if role in ("system", "developer"):
        return [("system", None, message.get("content"))]
    default = "assistant" if role == "assistant" else "user"
    parts: list[tuple[str, str | None, object]] = []
    if message.get("reasoning_content"):
        parts.append(("reasoning", None, message["reasoning_content"]))
    content = message.get("content")
    for block in content if isinstance(content, list) else [content] if content else []:
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "tool_use":
            parts.append(("tool_call", tool_class(block.get("name")), block))
        elif kind == "tool_result":
            parts.append(("tool_result", tool_class(names.get(str(block.get("tool_use_id")))), block))
        elif kind in _REASONING:
            parts.append(("reasoning", None, block))
        else:
            parts.append((default, None, block))
    for call in message.get("tool_calls") or []:
        fn = call.get("function") if isinstance(call, dict) and isinstance(call.get("function"), dict) else {}
        parts.append(("tool_call", tool_class(fn.get("name")), call))
    return parts


def prompt_segments(api: str, body: dict, count: Callable[[str], int], total: int,
                    head: int = 0) -> tuple[Segment, ...] | None:
    """The segments of a request body of `api`, adding up to `total` input tokens.

    `count(text)` is the tokenizer's length of a text; `head` is the length of an unlogged head
    (a session log's system prompt and tool definitions, one system segment). None for a
    Completions prompt: it has no structure to tell.
    """
    if api == "completions" or total <= 0:
        return None
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    runs: list[list] = []  # [kind, tokens, tool], adjacent equal kinds merged

    def add(kind: str, tokens: int, tool: str | None = None) -> None:
        if runs and runs[-1][0] == kind and runs[-1][2] == tool:
            runs[-1][1] += tokens
        elif tokens > 0:
            runs.append([kind, tokens, tool])

    add("system", head)
    tools = body.get("tools")
    if tools:
        add("tools", count(_json(tools)))
    if api == "messages" and body.get("system"):
        add("system", count(_json(body["system"])))
    names = _tool_names(messages)
    for m in messages:  # a message's own JSON (role, keys) goes to its last part: stable across turns
        parts = [[kind, count(_json(value)), tool] for kind, tool, value in _parts(m, names)]
        for kind, tokens, tool in _fit(parts, count(_json(m))) if parts else ():
            add(kind, tokens, tool)
    return tuple(Segment(kind, tokens, tool) for kind, tokens, tool in _fit(runs, total))


def _fit(runs: list[list], total: int) -> list[list]:
    """Make the lengths add up to `total`: the last run takes a shortfall, an excess comes off the end."""
    if not runs:
        return [["user", total, None]]
    diff = total - sum(r[1] for r in runs)
    if diff >= 0:
        runs[-1][1] += diff
    else:
        for r in reversed(runs):
            cut = min(r[1], -diff)
            r[1] -= cut
            diff += cut
            if diff == 0:
                break
    return [r for r in runs if r[1] > 0]
