"""Applied Compute TRIE agentic workload summaries: one JSONL row per sequential agent session.

`num_turns` tool-calling turns, `input_prompt_length`, `assistant_response_length[]`,
`tool_call_output_length[]`, `tool_call_latency[]` (seconds; all three with `num_turns` values)
and `final_assistant_response_length`. Turn k's prompt is the previous prompt plus the previous
answer and tool output; after the last tool turn one final request answers. No arrival times:
the format is meant for concurrency-driven (lanes) replay; every session starts at 0. Hash ids
are synthesized (`prefix.py`): each prompt extends the previous one in full.
"""

from __future__ import annotations

from pathlib import Path

import msgspec

from agentx.errors import TraceError
from agentx.traces.model import Count, Name, RecordId, Request, Seconds, Session, Stream, Tokens
from agentx.traces.prefix import IdCounter, append_chain
from agentx.traces.rows import check_request, check_time, decode_rows

BLOCK_SIZE = 64


class Row(msgspec.Struct):
    num_turns: Count
    input_prompt_length: Tokens
    assistant_response_length: list[Tokens]
    tool_call_output_length: list[Tokens]
    tool_call_latency: list[Seconds]
    final_assistant_response_length: Tokens
    session_id: Name | RecordId | None = None


def read_trie(path: str | Path, warn=None) -> list[Session]:
    stem = Path(path).name.split(".")[0]
    sessions = []
    for n, row in decode_rows(path, Row):
        for name in ("assistant_response_length", "tool_call_output_length", "tool_call_latency"):
            if len(getattr(row, name)) != row.num_turns:
                raise TraceError(str(path), f"line {n} {name}",
                                 f"has {len(getattr(row, name))} values, num_turns is {row.num_turns}")
        isls, osls, gaps = [row.input_prompt_length], [], [None]
        for out, tool, latency in zip(row.assistant_response_length, row.tool_call_output_length,
                                      row.tool_call_latency):
            osls.append(out)
            isls.append(isls[-1] + out + tool)
            gaps.append(round(latency, 6))
        osls.append(row.final_assistant_response_length)
        for k, isl in enumerate(isls):  # before any id is made: each prompt sums the turns before it
            check_request(path, f"line {n}", "input_prompt_length" if k == 0 else f"tool_call_output_length[{k - 1}]",
                          isl, 0, BLOCK_SIZE, False)
        check_time(path, f"line {n} tool_call_latency", sum(row.tool_call_latency))
        ids = append_chain(BLOCK_SIZE, IdCounter(), [], isls)
        requests, t = [], 0.0
        for isl, osl, gap, hash_ids in zip(isls, osls, gaps, ids):
            t += gap or 0.0
            requests.append(Request(t=round(t, 6), model="", isl=isl, osl=osl, hash_ids=hash_ids, think_time=gap))
        sid = str(row.session_id) if row.session_id is not None else f"{stem}-{n}"
        main = Stream(kind="main", requests=tuple(requests))
        # TRIE's "eligible" prompt tokens: turn k > 0 may reuse the previous prompt and its answer
        eligible = sum(min(isl, isls[k - 1] + osls[k - 1]) for k, isl in enumerate(isls) if k)
        sessions.append(Session(id=sid, block_size=BLOCK_SIZE, hash_id_scope="local", streams=(main,),
                                source_hit=("trie", eligible, sum(isls))))
    return sessions
