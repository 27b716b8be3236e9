"""A point's request timeline (a Gantt chart) and its conversations (flamegraph structure), both
from the run's records, in compact columnar form (SPEC §8)."""

from __future__ import annotations

import numpy as np

from agentx.results.series import _r

TIMELINE_VERSION = 1


def _codes(values: list) -> tuple[list, list[int]]:
    """Dictionary encoding: (distinct values in first-seen order, index per value)."""
    index: dict = {}
    codes = [index.setdefault(v, len(index)) for v in values]
    return list(index), codes


def build_timelines(c: dict) -> dict[str, dict]:
    """Two timelines, one with a row per conversation stream (tree, then main / subagents / aux in
    stream order), one with a row per lane. Times are seconds of the run clock."""
    n = len(c["start"])
    phases, phase_codes = _codes(c["phase"])
    errors, error_codes = _codes(c["error"])
    sessions, session_codes = _codes(c["session"])
    base = {
        "version": TIMELINE_VERSION, "n": n,
        "start": _r(c["start"]), "first_token": _r(c["start"] + c["ttft"]), "end": _r(c["end"]),
        "session": session_codes, "sessions": sessions, "tree": c["tree"].tolist(), "node": c["node"].tolist(),
        "phase": phase_codes, "phases": phases, "error": error_codes, "errors": errors,
        "isl": c["isl"].tolist(), "osl": c["osl"].tolist(), "cached": c["cached"].tolist(),
    }
    keys = list(zip(c["tree"].tolist(), c["stream"].tolist()))
    first_start: dict = {}
    for (tree, _), start in zip(keys, c["start"].tolist()):
        first_start[tree] = min(first_start.get(tree, start), start)
    ordered = sorted(set(keys), key=lambda k: (first_start[k[0]], k[0], k[1]))
    row_of = {k: i for i, k in enumerate(ordered)}
    kind_of = dict(zip(keys, c["stream_kind"]))
    session_of = dict(zip(c["tree"].tolist(), c["session"]))
    by_conversation = {**base, "by": "conversation", "row": [row_of[k] for k in keys],
                       "rows": [f"{session_of[t]} #{t} {kind_of[(t, s)]} {s}" for t, s in ordered]}
    lanes = sorted(set(c["lane"].tolist()))
    lane_row = {lane: i for i, lane in enumerate(lanes)}
    by_lane = {**base, "by": "lane", "row": [lane_row[x] for x in c["lane"].tolist()],
               "rows": [f"lane {lane}" for lane in lanes]}
    return {"timeline_conversation": by_conversation, "timeline_lane": by_lane}


def build_conversations(c: dict) -> list[dict]:
    """Per session, the replay of it with the most profiling requests: turns per stream with their
    input, cached (what an infinite prefix cache would hold), uncached and output tokens as planned.
    Subagent streams whose spans overlap form one group (subagents launched together)."""
    profile = [i for i, p in enumerate(c["phase"]) if p == "profile"]
    per_tree: dict[int, list[int]] = {}
    for i in profile:
        per_tree.setdefault(int(c["tree"][i]), []).append(i)
    best: dict[str, list[int]] = {}
    for tree in sorted(per_tree):
        rows = per_tree[tree]
        session = c["session"][rows[0]]
        if len(rows) > len(best.get(session, [])):
            best[session] = rows
    return [_conversation(session, rows, c) for session, rows in sorted(best.items())]


def _conversation(session: str, rows: list[int], c: dict) -> dict:
    streams: dict[int, dict] = {}
    for i in sorted(rows, key=lambda i: (c["stream"][i], c["node"][i])):
        s = streams.setdefault(int(c["stream"][i]), {"stream": int(c["stream"][i]), "kind": c["stream_kind"][i],
                                                     "turns": [], "start": c["start"][i], "end": c["end"][i]})
        isl, cached, osl = int(c["isl_planned"][i]), int(c["theo_cached"][i]), int(c["osl_planned"][i])
        s["turns"].append([int(c["node"][i]), isl, cached, isl - cached, osl])
        s["start"], s["end"] = min(s["start"], c["start"][i]), max(s["end"], c["end"][i])
    groups, group_end = 0, -np.inf
    for s in sorted((s for s in streams.values() if s["kind"] == "subagent"), key=lambda s: s["start"]):
        if s["start"] >= group_end:
            groups += 1
        group_end = max(group_end, s["end"]) if s["start"] < group_end else s["end"]
        s["group"] = groups
    turns = [t for s in streams.values() for t in s["turns"]]
    for s in streams.values():
        del s["start"], s["end"]
    return {
        "session": session, "turns": len(turns), "subagent_groups": groups,
        "input_tokens": sum(t[1] for t in turns), "cached_tokens": sum(t[2] for t in turns),
        "output_tokens": sum(t[4] for t in turns),
        "tree": {"columns": ["node", "input", "cached", "uncached", "output"], "streams": list(streams.values())},
    }
