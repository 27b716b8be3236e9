"""Capture end to end: scripted agent sessions through the recording proxy (a real process) in
front of the simulated engine, in Anthropic and OpenAI style; then the anonymizer's export."""

import asyncio
import json
import sqlite3
import subprocess
import sys

import aiohttp
import pytest
from tokenizers import Tokenizer

from agentx.capture.canonical import prompt_of
from agentx.capture.export import ExportConfig, export
from agentx.capture.recordings import read_rows
from agentx.engine.launch import agentx_server
from agentx.records import read_records
from agentx.replay.driver import bench
from agentx.replay.settings import BenchSettings
from agentx.traces.graph import build_graph
from agentx.traces.load import load_sessions
from agentx.traces.model import SEGMENT_KINDS
from agentx.traces.stats import session_hit_tokens
from tests.capture.agent import SECRETS, TOOLS
from tests.capture.conftest import STYLES

API = {"anthropic": "messages", "openai": "chat"}
STOPS = {"end_turn": "end_turn", "tool_use": "tool_use", "max_tokens": "max_tokens", "stop": "end_turn",
         "tool_calls": "tool_use", "length": "max_tokens"}


@pytest.mark.parametrize("style", STYLES)
def test_export_matches_what_the_agent_did(captured, tokenizer_path, style):
    script, session = captured["scripts"][style], captured["sessions"][style]
    tok = Tokenizer.from_file(str(tokenizer_path))
    main, subs = script.of("main"), [script.of("sub-a"), script.of("sub-b")]
    assert len(main) == 6 and [len(s) for s in subs] == [3, 3]
    assert [s.kind for s in session.streams] == ["main"]
    assert len(session.main.requests) == 6
    assert [len(c.requests) for c in session.main.children] == [3, 3]
    assert all(c.kind == "subagent" for c in session.main.children)
    # ISL: the tokens of the canonical prompt; OSL: the upstream's count; stop reasons
    exported = list(session.main.requests) + [r for c in session.main.children for r in c.requests]
    for req, s in zip(session.main.requests, main):
        assert req.isl == len(tok.encode(prompt_of(API[style], s.body).canonical(), add_special_tokens=False).ids)
        assert req.osl == s.output_tokens and req.stop == STOPS[s.stop]
        assert len(req.hash_ids) == req.isl // 64
    assert sorted(r.osl for r in exported) == sorted(s.output_tokens for s in main + subs[0] + subs[1])
    assert [r.type for r in session.main.requests] == ["s", "n", "s", "s", "s", "s"]
    assert all(r.ttft is not None and 0 < r.ttft <= r.api_time for r in exported if r.type == "s")
    assert session.main.requests[0].input_types == ("text",)
    assert session.main.requests[1].input_types == ("tool_result",)
    assert session.main.requests[0].output_types == ("tool_use",)
    # prefix sharing: the theoretical hit equals the reuse the engine really saw, within a few %
    hit, total = session_hit_tokens(session)
    used = main + subs[0] + subs[1]
    real = sum(s.cached_tokens for s in used) / sum(s.input_tokens for s in used)
    assert hit / total == pytest.approx(real, abs=0.04)
    # spawn after the third main turn, join at the fourth
    graph = build_graph(session)
    main_node = {n.position: n.index for n in graph.nodes if graph.streams[n.stream].kind == "main"}
    spawns = [e for e in graph.edges if e.kind == "spawn"]
    joins = [e for e in graph.edges if e.kind == "join"]
    assert len(spawns) == 2 and {e.src for e in spawns} == {main_node[2]}
    assert len(joins) == 2 and {e.dst for e in joins} == {main_node[3]}


def test_export_report_counts_every_drop(captured):
    report = captured["report"]
    assert report.recorded == 2 * (1 + 1 + 7 + 6)  # title, missing model, 6 main turns + a retry, 2 x 3 sub
    assert report.dropped["failed"] == 2 and report.dropped["duplicate"] == 2 and report.dropped["classifier"] == 2
    assert report.exported == 2 * 12 and report.sessions == 2 and report.subagents == 4
    assert 0 < report.tokenized_share < 0.8  # incremental tokenization skipped the resent history
    saved = json.loads((captured["root"] / "export" / "export_report.json").read_text())
    assert saved["dropped"] == report.dropped


def _bytes_under(folder) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file())


def test_export_leaks_no_content_and_no_secret(captured):
    data = _bytes_under(captured["root"] / "export")
    forbidden = [c for s in captured["scripts"].values() for c in s.contents]
    forbidden += list(SECRETS.values()) + list(TOOLS) + [f"{s}-session-7f3e" for s in STYLES]
    forbidden += ["Write a five word title", "sub-a", "tool_use_id", "toolu_", "call_"]
    assert len(forbidden) > 40
    leaked = [f for f in forbidden if f.encode() in data]
    assert not leaked


def test_store_keeps_content_and_ids_but_no_secret(captured):
    store = captured["store"]
    data = b"".join(p.read_bytes() for p in store.parent.glob(store.name + "*"))
    assert not [k for k, v in SECRETS.items() if v.encode() in data]
    rows = list(read_rows(store))
    assert {r.session_id for r in rows} == {f"{s}-session-7f3e" for s in STYLES}
    assert {r.agent_id for r in rows} == {None, "sub-a", "sub-b"}
    assert all("authorization" not in r.request_headers.lower() and "cookie" not in r.request_headers.lower()
               for r in rows)
    contents = [c for s in captured["scripts"].values() for c in s.contents]
    assert all(c.encode() in data for c in contents)  # the raw recording keeps the prompts
    db = sqlite3.connect(store)
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_hash_ids_stable_within_an_export_and_different_across(captured, tokenizer_path, tmp_path):
    again = export(ExportConfig(store=str(captured["store"]), tokenizer=str(tokenizer_path), out=str(tmp_path)))
    assert again.exported == captured["report"].exported
    first = captured["sessions"]["anthropic"].main.requests
    second = load_sessions([tmp_path / "traces"], None)[0].main.requests
    assert [r.isl for r in first] == [r.isl for r in second]
    for a, b in zip(first, first[1:]):  # each turn extends the last: its ids start with the last one's
        assert list(b.hash_ids[: len(a.hash_ids) - 1]) == list(a.hash_ids[:-1])
    assert not set(first[0].hash_ids.tolist()) & set(second[0].hash_ids.tolist())


def test_export_replays_with_agentx_bench(captured, sim, tmp_path):
    sessions = list(captured["sessions"].values())
    result = bench(BenchSettings.build(url=sim, concurrency=2, duration=20, out=str(tmp_path), clock_scale=100,
                                       warmup_requests_per_lane=2, grace=10), sessions)
    records = read_records(tmp_path)
    prof = [r for r in records if r.phase == "profile"]
    assert prof and all(r.error is None for r in records)
    assert all(r.isl == r.isl_planned and r.osl == r.osl_planned for r in prof)
    assert result["requests"]["profiled"] == len(prof)


def test_cli_export_and_bad_store(captured, tokenizer_path, tmp_path):
    run = [sys.executable, "-m", "agentx.cli", "capture", "export", "--tokenizer", str(tokenizer_path)]
    res = subprocess.run(run + ["--store", str(captured["store"]), "--out", str(tmp_path / "x"), "--scope", "global",
                                "--max-context", "1k"], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert "dropped over_max_context" in res.stdout and "agentx bench --traces" in res.stdout
    saved = json.loads((tmp_path / "x" / "export_report.json").read_text())
    assert saved["dropped"]["over_max_context"] > 0
    doc = json.loads(next((tmp_path / "x" / "traces").iterdir()).read_text())
    assert doc["hash_id_scope"] == "global"
    res = subprocess.run(run + ["--store", str(captured["store"]), "--out", str(tmp_path / "z"), "--max-context",
                                "10"], capture_output=True, text=True, timeout=120)  # nothing fits 10 tokens
    text = " ".join(res.stdout.split())
    assert res.returncode == 0 and "wrote 0 trace files" in text and "replay them with" not in text
    assert "no session was left to export" in text
    res = subprocess.run(run + ["--store", str(tmp_path / "none.db"), "--out", str(tmp_path / "y")],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode != 0 and "no such capture store" in res.stderr and "Traceback" not in res.stderr


def test_tokenized_share_never_exceeds_100_percent(sim, model, tokenizer_path, tmp_path):
    """A store whose turns are no prefix extensions of each other (each turn new tools, system
    text and question) leaves nothing to reuse: the share is 100 %, not more (tools and system
    texts are tokenized again to count their tokens, which the share must not add)."""
    async def turns(url):
        async with aiohttp.ClientSession() as http:
            for i in range(6):
                words = " ".join(f"w{i}x{j}" for j in range(400))
                body = {"model": model, "max_tokens": 80, "system": f"turn {i}: {words}",
                        "tools": [{"name": f"tool{i}", "description": words, "input_schema": {"type": "object"}}],
                        "messages": [{"role": "user", "content": f"question {i} {words[:200]}"}]}
                async with http.post(url + "/v1/messages", json=body,
                                     headers={"x-claude-code-session-id": "unrelated-turns"}) as resp:
                    assert resp.status == 200
                    await resp.read()

    store = tmp_path / "unrelated.db"
    with agentx_server("capture", "proxy", "--upstream", sim, "--listen", "127.0.0.1:0", "--store", str(store)) as url:
        asyncio.run(turns(url))
    report = export(ExportConfig(store=str(store), tokenizer=str(tokenizer_path), out=str(tmp_path / "export")))
    assert report.exported == 6
    assert 0.9 < report.tokenized_share <= 1.0


@pytest.mark.parametrize("style", STYLES)
def test_export_writes_segments_by_kind(captured, style):
    """Segments (SPEC §1): in prompt order, adding up to `in`, tool classes from the tool names,
    an earlier turn's segments kept by the next turn, and the per-kind reuse `trace stats` shows."""
    from agentx.traces.segment_stats import segment_shares

    session = captured["sessions"][style]
    requests = list(session.requests())
    assert all(r.segments and sum(g.tokens for g in r.segments) == r.isl for r in requests)
    first, second = session.main.requests[:2]
    assert [g.kind for g in first.segments] == ["tools", "system", "user"]
    assert [(g.kind, g.tool) for g in second.segments[3:]] == [("tool_call", "read"), ("tool_result", "read")]
    assert second.segments[:3] == first.segments[:2] + second.segments[2:3]
    kinds = {g.kind for r in requests for g in r.segments}
    assert {"tools", "system", "user", "tool_call", "tool_result"} <= kinds <= set(SEGMENT_KINDS)
    assert {g.tool for r in requests for g in r.segments if g.kind == "tool_call"} >= {"read", "shell"}
    shares = {k.kind: k for k in segment_shares([session])}
    assert shares["tools"].tokens == sum(r.segments[0].tokens for r in requests)
    assert shares["tools"].reused == shares["tools"].new > 0  # every later turn resends the definitions
    assert 0 < shares["tool_result:read"].new and shares["tool_result:read"].reused <= shares["tool_result:read"].new
    assert sum(k.tokens for k in shares.values()) == sum(r.isl for r in requests)
    last = max(requests, key=lambda r: r.t)  # what it adds nobody sends again
    assert sum(k.reused for k in shares.values()) < sum(k.new for k in shares.values())
    assert last.isl - len(last.hash_ids) * 64 >= 0


def test_trace_stats_prints_the_kind_table(captured):
    out = subprocess.run([sys.executable, "-m", "agentx.cli", "trace", "stats", str(captured["root"] / "export" / "traces")],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "Input by segment kind" in out.stdout and "tool_result:read" in out.stdout and "tool_call:shell" in out.stdout
    doc = json.loads(subprocess.run([sys.executable, "-m", "agentx.cli", "trace", "stats", "--json",
                                     str(captured["root"] / "export" / "traces")],
                                    capture_output=True, text=True, timeout=120).stdout)
    assert {k["kind"] for k in doc["segments"]} >= {"tools", "system", "user", "tool_call:read", "tool_result:shell"}
