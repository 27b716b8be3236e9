"""Harness hints (`bench --hints`, SPEC §2 "Harness hints"): what an agent harness knows about a
request's stream when the KV it concerns becomes free, sent with the request.

- `none`: nothing.
- `harness`: what a harness knows by the time the answer has arrived: the stream's session and
  parent ids, the turn index, the stable prefix (tokens shared with the stream's previous
  prompt), whether the answer calls a tool and the tool's class, how many subagents the answer
  forks and how many prompt tokens they share with this request, and whether the stream ends.
- `oracle`: the same, plus what only the trace knows: the recorded gap until the stream's next
  request, the recorded answer length, and the next use of every block of the prompt across the
  session tree (`next_use`: when each stream of the tree next sends a request sharing a prefix
  of this prompt, as steps of prefix length and recorded gap).

A hint about the answer (tool call, fork, end) rides on the request because the KV it is about is
only freed when that answer ends: an engine acts on it then, when a harness would have told it.
"""

from __future__ import annotations

import bisect
import json
from enum import StrEnum

from agentx.common import shared_prefix
from agentx.traces.graph import SessionGraph, chain_gap


class HintLevel(StrEnum):
    NONE = "none"
    HARNESS = "harness"
    ORACLE = "oracle"


HINT_MEMBER = "agentx_hints"
# field -> header (SPEC §2); the session ids travel in X-Session-ID / X-Parent-Session-ID already
HEADERS = {"turn": "X-Agentx-Turn", "prefix_tokens": "X-Agentx-Prefix-Tokens",
           "tool_result_tokens": "X-Agentx-Tool-Result-Tokens", "tool_call": "X-Agentx-Tool-Call",
           "fork": "X-Agentx-Fork", "fork_shared_tokens": "X-Agentx-Fork-Shared-Tokens",
           "session_end": "X-Agentx-Session-End", "next_gap_s": "X-Agentx-Next-Gap", "osl": "X-Agentx-OSL",
           "next_use": "X-Agentx-Next-Use"}
NEXT_USE_STEPS = 64  # at most this many (prefix, gap) steps (the tree's streams sharing the most)


def _tool_call(graph: SessionGraph, node: int) -> str | None:
    """The class of the tool the answer calls ("other" when unknown), or None when it calls none:
    the recorded stop, else the next request of the stream starting with a tool result."""
    n = graph.nodes[node]
    stream = graph.streams[n.stream].requests
    req = n.request
    nxt = stream[n.position + 1] if n.position + 1 < len(stream) else None
    calls = req.stop == "tool_use" or (req.stop is None and nxt is not None and "tool_result" in (nxt.input_types or ()))
    if not calls:
        return None
    if nxt is not None and nxt.segments:
        tools = [g.tool for g in nxt.segments if g.kind == "tool_call"]
        if tools and tools[-1]:
            return tools[-1]
    return "other"


def _tool_result_tokens(req, prefix: int) -> int:
    """Tokens of the prompt past its stable prefix (`prefix` tokens) that are tool results: from
    the segments where the trace has them, else all of them when the input is tool results alone
    (`input_types`), else none."""
    new = max(0, req.isl - prefix)
    if req.segments:
        pos = out = 0
        for seg in req.segments:
            if seg.kind == "tool_result":
                out += max(0, pos + seg.tokens - max(pos, prefix))
            pos += seg.tokens
        return min(out, new)
    types = req.input_types or ()
    return new if types and all(t == "tool_result" for t in types) else 0


def _forks(graph: SessionGraph, node: int, block: int) -> tuple[int, int]:
    """(subagents spawned from this request, prompt tokens the first of them shares with it)."""
    children = [e.dst for e in graph.out_edges[node] if e.kind == "spawn"]
    if not children:
        return 0, 0
    own = graph.nodes[node].request.hash_ids
    shared = max(shared_prefix(own, graph.nodes[c].request.hash_ids) for c in children)
    return len(children), shared * block


def next_use(graph: SessionGraph, node: int, block: int) -> list[list]:
    """When the blocks of this request's prompt are next used across its session tree, from the
    trace: for each stream, its first request starting at or after this one (its next in its own
    stream) shares a prefix of this prompt and starts some recorded seconds after this one ends.
    A block's next use is the earliest of those whose shared prefix covers it. Returned as steps
    `[tokens, gap_s]`, longest prefix first: the first `tokens` tokens are next used `gap_s` after
    this request ends (the gaps fall as the prefix shortens); tokens past the first step are not
    used again in the tree."""
    n = graph.nodes[node]
    own, end, t0 = n.request.hash_ids, n.request.end, n.request.t
    uses = []
    for index, stream in enumerate(graph.streams):
        requests = stream.requests
        at = n.position + 1 if index == n.stream else bisect.bisect_left([r.t for r in requests], t0)
        if at < len(requests):
            shared = shared_prefix(own, requests[at].hash_ids)
            if shared:
                uses.append((shared, max(0.0, requests[at].t - end)))
    steps: list[list] = []
    for shared, gap in sorted(uses, reverse=True):
        if steps and gap >= steps[-1][1]:
            continue  # covered by a longer prefix used sooner
        if steps and shared == steps[-1][0] // block:
            steps[-1][1] = round(gap, 6)
        else:
            steps.append([shared * block, round(gap, 6)])
    return steps[:NEXT_USE_STEPS]


def request_hints(level: str, graph: SessionGraph, node: int, session_id: str, parent_id: str | None,
                  shared_blocks: int, block: int, osl: int) -> dict | None:
    """The hints of one request at `level` (None for `none`); `shared_blocks`: hash blocks it
    shares with its stream's previous request, `block`: tokens per hash block."""
    if level == HintLevel.NONE:
        return None
    n = graph.nodes[node]
    stream = graph.streams[n.stream].requests
    last = n.position == len(stream) - 1
    hints: dict = {"session_id": session_id, "turn": n.position, "prefix_tokens": shared_blocks * block}
    tool_results = _tool_result_tokens(n.request, shared_blocks * block)
    if tool_results:
        hints["tool_result_tokens"] = tool_results
    if parent_id is not None:
        hints["parent_session_id"] = parent_id
    tool = _tool_call(graph, node)
    if tool is not None:
        hints["tool_call"] = tool
    fork, fork_shared = _forks(graph, node, block)
    if fork:
        hints["fork"], hints["fork_shared_tokens"] = fork, fork_shared
    if last:
        hints["session_end"] = True
    if level == HintLevel.ORACLE:
        hints["osl"] = osl
        if not last:
            hints["next_gap_s"] = round(chain_gap(n.request, stream[n.position + 1]), 6)
        hints["next_use"] = next_use(graph, node, block)
    return hints


def hint_headers(hints: dict | None) -> dict[str, str]:
    if not hints:
        return {}
    out = {}
    for name, header in HEADERS.items():
        if name in hints:
            value = hints[name]
            if isinstance(value, list):  # next_use: "tokens:gap,tokens:gap"
                out[header] = ",".join(f"{t}:{g:g}" for t, g in value)
            else:
                out[header] = ("true" if value else "false") if isinstance(value, bool) else str(value)
    return out


def hint_member(hints: dict | None) -> bytes | None:
    """The body member `"agentx_hints":{...}` (what an OpenAI client's `extra_body` adds)."""
    if not hints:
        return None
    return f'"{HINT_MEMBER}":'.encode() + json.dumps(hints, separators=(",", ":")).encode()
