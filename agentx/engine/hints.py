"""The harness hints a request may carry (SPEC §2 "Harness hints"): the body member
`agentx_hints`, decoded bounded at the API; what the KV policies (`eviction.py`) read."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

_Id = Annotated[str, msgspec.Meta(max_length=1000)]
_Count = Annotated[int, msgspec.Meta(ge=0, le=10_000_000)]


class Hints(msgspec.Struct, kw_only=True, frozen=True):
    session_id: _Id | None = None
    parent_session_id: _Id | None = None
    turn: _Count = 0
    prefix_tokens: _Count = 0  # tokens shared with the stream's previous prompt (the stable prefix)
    tool_result_tokens: _Count = 0  # of the prompt's tokens past that prefix, those that are tool results
    tool_call: Literal["read", "search", "edit", "shell", "web", "other"] | None = None  # the answer calls a tool
    fork: _Count = 0  # subagents the answer spawns
    fork_shared_tokens: _Count = 0  # prompt tokens they share with this request
    session_end: bool = False  # the stream's last request
    next_gap_s: Annotated[float, msgspec.Meta(ge=0, le=1e10)] | None = None  # oracle: the recorded gap to the next
    osl: _Count | None = None  # oracle: the recorded answer length
    # oracle: the prompt's blocks' next use in the session tree, [tokens, gap_s] steps, longest first
    next_use: Annotated[list[tuple[_Count, Annotated[float, msgspec.Meta(ge=0, le=1e10)]]],
                        msgspec.Meta(max_length=64)] | None = None

    def record(self) -> dict:
        """The hints as the truth log writes them (set fields only)."""
        out = {k: v for k, v in msgspec.structs.asdict(self).items() if v is not None and v is not False}
        if "next_use" in out:
            out["next_use"] = [list(step) for step in out["next_use"]]
        if not self.fork:
            del out["fork"], out["fork_shared_tokens"]
        if not self.tool_result_tokens:
            del out["tool_result_tokens"]
        return out
