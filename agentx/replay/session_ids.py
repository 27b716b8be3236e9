"""Session identity as routers see it (SPEC §2, "Session identity").

Every stream of a replayed tree is its own session: the main agent, each subagent and each aux
chain get their own id, and a stream's parent (the stream that spawned or branched it) is named
alongside. A session-affinity router then places a subagent as a new conversation linked to its
parent instead of piling it onto the parent's worker. `--session-headers` picks how the ids are
sent; every preset sends agentx's own pair (`X-Session-ID`, `X-Parent-Session-ID`) and adds the
fields its router reads:
- `plain`: the pair only.
- `dynamo`: `X-Dynamo-Session-ID`, `X-Dynamo-Parent-Session-ID`, `X-Dynamo-Session-Final: true`
  on the stream's last request, and `nvext.session_control` in the body (`session_id`, `timeout`
  300, `action` `open` on the stream's first request and `close` on its last).
- `sglang`: `X-SMG-Routing-Key` (the SGLang Model Gateway's sticky-session routing key).
- `llm-d`: the `llm-d-session` cookie of llm-d's session-affinity scorer: the gateway sets it on a
  response (the serving pod, base64) and the stream sends it back on its next requests; a new
  stream (a subagent) starts without one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import StrEnum

from agentx.errors import AgentxError

SESSION_TIMEOUT_S = 300  # Dynamo's default inactivity timeout of an opened session
LLMD_COOKIE = "llm-d-session"


class PresetName(StrEnum):
    PLAIN = "plain"
    DYNAMO = "dynamo"
    SGLANG = "sglang"
    LLMD = "llm-d"


PRESETS = tuple(PresetName)


def stream_session_id(tree_id: str, k: int) -> str:
    """Stream k's session id: the main stream is the tree's id, stream k > 0 is `TREE.k`."""
    return tree_id if k == 0 else f"{tree_id}.{k}"


def stream_session_ids(tree_id: str, parents: tuple[int, ...]) -> tuple[list[str], list[str | None]]:
    """(session id, parent session id) per stream of a session graph (`stream_session_id`); a
    subagent's parent is the stream that spawned it, an aux chain's the main stream."""
    ids = [stream_session_id(tree_id, k) for k in range(len(parents))]
    return ids, [None if k == 0 else ids[p if p >= 0 else 0] for k, p in enumerate(parents)]


@dataclass(frozen=True, slots=True)
class StreamTurn:
    """Where a request stands in its stream, as the presets need it."""

    session_id: str
    parent_id: str | None
    first: bool  # the stream's first request
    last: bool  # the stream's last request
    cookie: str | None = None  # llm-d: the stream's last `llm-d-session` value


def _pair(turn: StreamTurn) -> dict[str, str]:
    """agentx's own pair, which every preset sends."""
    headers = {"X-Session-ID": turn.session_id}
    if turn.parent_id is not None:
        headers["X-Parent-Session-ID"] = turn.parent_id
    return headers


class Plain:
    """The pair only."""

    keeps_cookie = False

    def headers(self, turn: StreamTurn) -> dict[str, str]:
        return _pair(turn)

    def body_field(self, turn: StreamTurn, hints: dict | None = None) -> bytes | None:
        """The JSON member the preset adds to the request body (None: none)."""
        return None


class Dynamo(Plain):
    def headers(self, turn: StreamTurn) -> dict[str, str]:
        headers = _pair(turn)
        headers["X-Dynamo-Session-ID"] = turn.session_id
        if turn.parent_id is not None:
            headers["X-Dynamo-Parent-Session-ID"] = turn.parent_id
        if turn.last:
            headers["X-Dynamo-Session-Final"] = "true"
        return headers

    def body_field(self, turn: StreamTurn, hints: dict | None = None) -> bytes | None:
        """`nvext.session_control`: opened on the stream's first request, closed on its last; with
        `--hints`, `nvext.agent_hints` (Dynamo's): `speculative_prefill` when the answer calls a
        tool (the next turn follows it), `osl` at the oracle level."""
        control = {"session_id": turn.session_id, "timeout": SESSION_TIMEOUT_S}
        if turn.last:
            control["action"] = "close"
        elif turn.first:
            control["action"] = "open"
        nvext: dict = {"session_control": control}
        if hints:
            agent = {"speculative_prefill": True} if "tool_call" in hints else {}
            if "osl" in hints:
                agent["osl"] = hints["osl"]
            if agent:
                nvext["agent_hints"] = agent
        return b'"nvext":' + json.dumps(nvext, separators=(",", ":")).encode()


class SGLang(Plain):
    def headers(self, turn: StreamTurn) -> dict[str, str]:
        headers = _pair(turn)
        headers["X-SMG-Routing-Key"] = turn.session_id
        return headers


class LLMD(Plain):
    """The cookie the gateway set on the stream's last answer, sent back."""

    keeps_cookie = True

    def headers(self, turn: StreamTurn) -> dict[str, str]:
        headers = _pair(turn)
        if turn.cookie:
            headers["Cookie"] = f"{LLMD_COOKIE}={turn.cookie}"
        return headers


_PRESETS = {PresetName.PLAIN: Plain, PresetName.DYNAMO: Dynamo, PresetName.SGLANG: SGLang, PresetName.LLMD: LLMD}


def preset(name: str) -> Plain:
    """The preset object of a `--session-headers` name."""
    try:
        return _PRESETS[PresetName(name)]()
    except ValueError:
        raise AgentxError(f"want one of {', '.join(PRESETS)}, got {name!r}", "session_headers") from None


def with_body_field(body, member: bytes | None):
    """`{member,...rest}`: the body's JSON object with one more member first."""
    if member is None:
        return body
    return b"{" + member + b"," + bytes(body[1:])


def llmd_cookie(set_cookie: str | None) -> str | None:
    """The `llm-d-session` value of a response's Set-Cookie header, if it sets one."""
    for line in (set_cookie or "").split("\n"):
        name, _, rest = line.strip().partition("=")
        if name == LLMD_COOKIE:
            return rest.split(";", 1)[0]
    return None


class SessionIdentity:
    """The session identity of every replayed tree's streams, and the cookie each stream holds."""

    def __init__(self, name: str, run_id: str):
        self.preset, self.run_id = preset(name), run_id
        self._ids: dict[int, tuple[list[str], list[str | None]]] = {}
        self._cookies: dict[tuple[int, int], str] = {}

    def turn(self, tree: int, graph, node: int) -> StreamTurn:
        ids = self._ids.get(tree)
        if ids is None:
            ids = self._ids[tree] = stream_session_ids(f"{self.run_id}-{tree}", graph.parents)
        n = graph.nodes[node]
        last = n.position == len(graph.streams[n.stream].requests) - 1
        return StreamTurn(ids[0][n.stream], ids[1][n.stream], n.position == 0, last,
                          self._cookies.get((tree, n.stream)))

    def answered(self, tree: int, stream: int, set_cookie: str | None) -> None:
        if self.preset.keeps_cookie and (cookie := llmd_cookie(set_cookie)):
            self._cookies[(tree, stream)] = cookie

    def forget(self, tree: int, n_streams: int) -> None:
        self._ids.pop(tree, None)
        for k in range(n_streams):
            self._cookies.pop((tree, k), None)
