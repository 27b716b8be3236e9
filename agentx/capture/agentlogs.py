"""`agentx capture import`: Claude Code's and Codex's local session logs as a capture source (SPEC §7).

The agents already keep every conversation on disk: Claude Code one JSONL file per session under
`~/.claude/projects/<project>/` (subagents as sidechain records, or in
`<session>/subagents/agent-*.jsonl`), Codex one rollout JSONL per session under
`~/.codex/sessions/YYYY/MM/DD/` (a subagent's rollout names its parent thread). Each model call
in them becomes the same kept request the proxy path exports (`export._Item`): the messages sent
(everything earlier in its conversation), the answer, the usage and the times, then the proxy
path's tokenizer, salted chained hashes, clean-up and report take over (`export.write_export`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Iterator

from agentx.capture.answers import Answer
from agentx.capture.canonical import prompt_of
from agentx.capture.export import ExportConfig, ExportReport, _Item, write_export
from agentx.capture.logfiles import MAX_PROMPT, ClaudeLine, CodexLine, log_files, records
from agentx.capture.recordings import Row
from agentx.errors import AgentxError, TraceError
from agentx.userfiles import shown


@dataclass
class _Call:
    """One model call found in a log, before it becomes an export item."""

    api: str  # the canonical prompt's API style: messages (Claude Code) or chat (Codex)
    agent: str | None  # None for the main agent
    messages: list
    start: float
    first_token: float
    end: float
    model: str
    isl: int | None
    osl: int | None
    stop: str | None = None
    output_types: list[str] = field(default_factory=list)
    tool_calls: list[dict] = field(default_factory=list)


def _time(text, file: Path, record: str) -> float:
    try:
        return datetime.fromisoformat(str(text).replace("Z", "+00:00")).timestamp()
    except ValueError:
        raise TraceError(shown(file), record, f"timestamp: not an ISO time: {str(text)[:100]!r}") from None


def _prompt_bound(size: int, file: Path, where: str) -> None:
    if size > MAX_PROMPT:
        raise TraceError(shown(file), where, f"a prompt of {size:,} bytes of records, over the bound of {MAX_PROMPT:,}")


def _counts(usage, keys: tuple[str, ...], where: tuple[Path, str], name: str) -> dict[str, int]:
    """The token counts present in a usage object; anything but a non-negative integer is an error."""
    if not isinstance(usage, dict):
        raise TraceError(shown(where[0]), where[1], f"{name}: not an object")
    out = {}
    for key in keys:
        value = usage.get(key)
        if value is None:
            continue
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise TraceError(shown(where[0]), where[1], f"{name}.{key}: want a count, got {str(value)[:40]!r}")
        out[key] = value
    return out


def _item(number: int, call: _Call, session: str) -> _Item:
    body = {"model": call.model, "messages": call.messages}
    row = Row(id=number, api=call.api, path="", session_id=session, agent_id=call.agent, request_id=None,
              start=call.start, first_byte=call.first_token, first_token=call.first_token, end=call.end,
              status=200, error=None, stream=True, request_headers="{}", request_body=b"", response_headers=None,
              response=None, response_bytes=None, response_sha256=None)
    answer = Answer(model=call.model, tool_calls=call.tool_calls, output_types=call.output_types, stop=call.stop,
                    input_tokens=call.isl, output_tokens=call.osl, complete=True)
    return _Item(row, body, prompt_of(call.api, body), answer, recorded_isl=call.isl)


# --- Claude Code ---------------------------------------------------------------------------------

_CLAUDE_OUTPUT = {"text": "text", "thinking": "thinking", "redacted_thinking": "thinking", "tool_use": "tool_use"}


class _ClaudeStream:
    """The conversation of one agent (main, or one subagent) and its calls, in record order."""

    def __init__(self, agent: str | None):
        self.agent, self.messages, self.calls = agent, [], {}
        self.last_input: float | None = None
        self.size = 0  # bytes of the records the conversation holds (a prompt's bound)

    def add(self, rec: dict, t: float, where: tuple[Path, str], size: int) -> None:
        msg = rec["message"]
        if rec.get("isCompactSummary"):
            self.messages, self.size = [], 0  # the conversation restarts from its summary
        self.size += size
        _prompt_bound(self.size, *where)
        if rec.get("type") != "assistant":
            self.messages.append({"role": msg.get("role", "user"), "content": msg.get("content")})
            self.last_input = t
            return
        mid = msg.get("id") or rec.get("requestId")
        if not mid or msg.get("model") == "<synthetic>":
            return  # an error the agent wrote itself: no model call
        blocks = msg.get("content") if isinstance(msg.get("content"), list) else [msg.get("content")]
        call = self.calls.get(mid)
        if call is None:
            self.messages.append({"role": "assistant", "content": []})
            call = self.calls[mid] = (_Call("messages", self.agent, self.messages[:-1], self.last_input or t, t, t,
                                            msg.get("model") or "", None, None), self.messages[-1])
        call[1]["content"].extend(b for b in blocks if b is not None)
        c = call[0]
        c.end = t
        usage = _counts(msg.get("usage") or {}, ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens",
                                                 "output_tokens"), where, "message.usage")
        if "output_tokens" in usage and (c.osl is None or usage["output_tokens"] >= c.osl):
            c.osl = usage.pop("output_tokens")
            c.isl = sum(usage.values())
        c.stop = msg.get("stop_reason") or c.stop
        for b in blocks:
            kind = _CLAUDE_OUTPUT.get(b.get("type")) if isinstance(b, dict) else "text"
            if kind and kind not in c.output_types:
                c.output_types.append(kind)
            if isinstance(b, dict) and b.get("type") == "tool_use":
                c.tool_calls.append({"id": "", "name": "", "arguments": ""})


def claude_sessions(root: Path, skipped: list[str] | None = None) -> Iterator[tuple[list[_Call], int]]:
    """(calls in time order, calls without usage) per session: every record of a session carries
    its `sessionId`, in the session's own file or in its subagents' files. A subagent is named by
    its `agentId`; older versions write subagents into the session file as sidechain records,
    where a record continues its parent's sidechain and one without a sidechain parent opens a
    new subagent."""
    files = log_files(root, "Claude Code session files", skipped)
    sessions: dict[str, tuple[dict[str, _ClaudeStream], dict[str, str | None]]] = {}
    for file in files:
        for where, rec, size in records(file, ClaudeLine):
            if not isinstance(rec.get("message"), dict) or rec.get("type") not in ("user", "assistant"):
                continue  # summaries, snapshots, system notes: no conversation content
            streams, agents = sessions.setdefault(str(rec.get("sessionId") or file.stem), ({}, {}))
            agent = rec.get("agentId")
            if agent is None and rec.get("isSidechain"):
                agent = agents.get(rec.get("parentUuid")) or str(rec.get("uuid") or "sidechain")
            if rec.get("uuid"):
                agents[rec["uuid"]] = agent
            stream = streams.setdefault(agent or "", _ClaudeStream(agent))
            stream.add(rec, _time(rec.get("timestamp"), file, where), (file, where), size)
    for streams, _ in sessions.values():
        calls = [c for s in streams.values() for c, _ in s.calls.values()]
        kept = sorted((c for c in calls if c.isl is not None), key=lambda c: c.start)
        yield kept, len(calls) - len(kept)


# --- Codex ---------------------------------------------------------------------------------------

_CODEX_OUTPUT = {"reasoning": "thinking", "message": "text", "function_call": "tool_use", "custom_tool_call": "tool_use"}


def _codex_message(p: dict) -> dict | None:
    kind = p.get("type")
    if kind == "message":
        return {"role": p.get("role"), "content": p.get("content")}
    if kind in ("function_call", "custom_tool_call"):
        return {"role": "assistant", "tool_calls": [{"id": p.get("call_id"), "type": "function", "function": {
            "name": p.get("name"), "arguments": p.get("arguments", p.get("input"))}}]}
    if kind in ("function_call_output", "custom_tool_call_output"):
        return {"role": "tool", "tool_call_id": p.get("call_id"), "content": p.get("output")}
    if kind == "reasoning":  # its readable summary: the encrypted content is not the model's tokens
        return {"role": "assistant", "content": [{"type": "reasoning", "summary": p.get("summary")}]}
    return None


def _dig(obj, *keys):
    """obj[k1][k2]... where every step is an object, else None."""
    for key in keys:
        obj = obj.get(key) if isinstance(obj, dict) else None
    return obj


def _codex_file(file: Path) -> tuple[str, str | None, list[_Call], int]:
    """(thread id, parent thread id, calls, calls without usage) of one rollout file."""
    thread = parent = None
    messages, calls, open_call, last_input, model, replaying, unused = [], [], None, None, "", False, 0
    size = 0
    for where, rec, line_size in records(file, CodexLine):
        size += line_size
        _prompt_bound(size, file, where)
        p = rec.get("payload") if isinstance(rec.get("payload"), dict) else {}
        kind, t = rec.get("type"), rec.get("timestamp")
        if t is not None:
            _time(t, file, where)  # every record's time is one, also where it is not used
        if kind == "session_meta":
            if thread is None:
                thread = str(p.get("id") or file.stem)
                parent = _dig(p, "source", "subagent", "thread_spawn", "parent_thread_id")
                if isinstance(p.get("instructions"), str):
                    messages.append({"role": "developer", "content": p["instructions"]})
            elif p.get("id") != thread:
                replaying = True  # a subagent's copy of its parent's history: context, not calls
            continue
        if kind == "turn_context":
            model, replaying = p.get("model") or model, False
            continue
        ts = _time(t, file, where) if t is not None else last_input or 0.0
        if kind == "response_item" and (message := _codex_message(p)) is not None:
            messages.append(message)
            is_output = p.get("type") in _CODEX_OUTPUT and (p.get("type") != "message" or p.get("role") == "assistant")
            if not is_output:
                last_input = ts
            elif not replaying:
                if open_call is None:
                    open_call = _Call("chat", None, messages[:-1], last_input or ts, ts, ts, model, None, None)
                open_call.end = ts
                kind_out = _CODEX_OUTPUT[p["type"]]
                if kind_out not in open_call.output_types:
                    open_call.output_types.append(kind_out)
                if kind_out == "tool_use":
                    open_call.tool_calls.append({"id": "", "name": "", "arguments": ""})
        elif kind == "event_msg" and p.get("type") == "token_count" and open_call is not None:
            info = p.get("info") if isinstance(p.get("info"), dict) else {}
            usage = _counts(info.get("last_token_usage") or {}, ("input_tokens", "output_tokens"), (file, where),
                            "payload.info.last_token_usage")
            if "input_tokens" in usage:
                open_call.isl, open_call.osl = usage["input_tokens"], usage.get("output_tokens", 0)
                open_call.end = ts
                open_call.stop = "tool_use" if "tool_use" in open_call.output_types else "end_turn"
                calls.append(open_call)
            else:
                unused += 1
            open_call = None
    unused += open_call is not None
    return thread or file.stem, parent, calls, unused


def codex_sessions(root: Path, skipped: list[str] | None = None) -> Iterator[tuple[list[_Call], int]]:
    """A root thread's calls with those of every subagent thread below it, per session."""
    files = log_files(root, "Codex rollout files", skipped)
    threads = {}
    for file in files:
        thread, parent, calls, unused = _codex_file(file)
        threads[thread] = (parent, calls, unused)

    def root_of(thread: str) -> str:
        seen = set()
        while threads[thread][0] in threads and thread not in seen:
            seen.add(thread)
            thread = threads[thread][0]
        return thread

    groups: dict[str, list[str]] = {}
    for thread in threads:
        groups.setdefault(root_of(thread), []).append(thread)
    for top, members in groups.items():
        calls, unused = [], 0
        for thread in members:
            _, own, n = threads[thread]
            for c in own:
                c.agent = None if thread == top else thread
            calls += own
            unused += n
        yield sorted(calls, key=lambda c: c.start), unused


def import_logs(cfg: ExportConfig, claude: list[Path], codex: list[Path]) -> ExportReport:
    """Anonymize the sessions of the given Claude Code and Codex stores into one WEKA export."""
    out = Path(cfg.out)
    if (out.exists() or out.is_symlink()) and not out.is_dir():
        raise AgentxError(f"--out {shown(out)}: not a folder")
    report = ExportReport()
    providers: dict[int, str] = {}

    def sessions():
        number = 0
        for provider, roots, read in (("claude", claude, claude_sessions), ("codex", codex, codex_sessions)):
            for root in roots:
                for calls, unused in read(Path(root).expanduser(), report.skipped_files):
                    report.recorded += len(calls) + unused
                    report.dropped["failed"] += unused
                    if not calls:
                        continue
                    number += 1
                    items = [_item(i, c, f"{provider}-{number}") for i, c in enumerate(calls)]
                    providers[id(items)] = provider
                    yield items

    return write_export(cfg, sessions(), report, provider=lambda items: providers.pop(id(items)))
