"""Agentic RL rollout traces (as vLLM's TPU agentic benchmark uses): one JSONL row per stream.

`group`, `stream`, `prompt_len`, `out_lens[]` (one answer per turn) and `obs_lens[]` (the
observation appended after each answer but the last). Turn k's prompt is the previous prompt
plus its answer and observation. The streams of one group start from the same prompt: its full
blocks get the same ids in every stream (`global` scope, ids counted from a base derived from
the file name so that two files do not share ids), the rest of each stream is its own. Each
stream is a session (`GROUP:STREAM`) starting at 0; turns follow each other with no gap
(rollouts have no tool time).
"""

from __future__ import annotations

import zlib
from pathlib import Path

import msgspec

from agentx.errors import TraceError
from agentx.traces.model import Name, RecordId, Request, Session, Stream, Tokens
from agentx.traces.prefix import IdCounter, append_chain
from agentx.traces.rows import check_request, decode_rows

BLOCK_SIZE = 64


class Row(msgspec.Struct):
    group: Name | RecordId
    prompt_len: Tokens
    out_lens: list[Tokens]
    stream: Name | RecordId | None = None
    obs_lens: list[Tokens] = []


def read_rollout(path: str | Path, warn=None) -> list[Session]:
    counter = IdCounter(((zlib.crc32(Path(path).name.encode()) & 0xFFFFFF) + 1) << 32)
    prompts: dict[tuple, object] = {}  # (group, prompt_len) -> the prompt's block ids
    sessions, seen = [], set()
    for n, row in decode_rows(path, Row):
        if not row.out_lens:
            raise TraceError(str(path), f"line {n} out_lens", "empty: a stream needs at least one turn")
        if len(row.obs_lens) not in (len(row.out_lens) - 1, len(row.out_lens)):
            raise TraceError(str(path), f"line {n} obs_lens",
                             f"has {len(row.obs_lens)} values for {len(row.out_lens)} turns")
        sid = f"{row.group}:{row.stream if row.stream is not None else n}"
        if sid in seen:
            raise TraceError(str(path), f"line {n} stream", f"duplicate stream {sid!r}")
        seen.add(sid)
        isls = [row.prompt_len]
        for out, obs in zip(row.out_lens[:-1], row.obs_lens):
            isls.append(isls[-1] + out + obs)
        for k, isl in enumerate(isls):  # before any id is made: each prompt sums the turns before it
            field = "prompt_len" if k == 0 else f"obs_lens[{k - 1}]"
            check_request(path, f"line {n}", field, isl, 0, BLOCK_SIZE, False)
        key = (row.group, row.prompt_len)
        if key not in prompts:
            prompts[key] = counter.take(row.prompt_len // BLOCK_SIZE)
        ids = append_chain(BLOCK_SIZE, counter, prompts[key], isls)
        requests = tuple(Request(t=0.0, model="", isl=isl, osl=osl, hash_ids=h, think_time=0.0 if k else None)
                         for k, (isl, osl, h) in enumerate(zip(isls, row.out_lens, ids)))
        sessions.append(Session(id=sid, block_size=BLOCK_SIZE, hash_id_scope="global",
                                streams=(Stream(kind="main", requests=requests),)))
    return sessions
