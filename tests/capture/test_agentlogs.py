"""`agentx capture import` on synthetic Claude Code and Codex stores: request counts, token counts,
subagents and timing as the files say, and nothing private in the export."""

import gzip
import json
import subprocess
import sys

import pytest

from agentx.capture.agentlogs import import_logs
from agentx.capture.export import ExportConfig
from agentx.errors import TraceError
from agentx.traces.load import load_sessions
from tests.capture.agentlogs_files import PRIVATE, claude_store, codex_store
from tests.conftest import DATA


def _export(tmp_path, tokenizer_path, claude=(), codex=()):
    out = tmp_path / "out"
    report = import_logs(ExportConfig(store="", tokenizer=str(tokenizer_path), out=str(out)), list(claude), list(codex))
    return report, out, load_sessions([out / "traces"])


def _counts(stream):
    return [(r.isl, r.osl) for r in stream.requests]


def test_claude_code_store(tmp_path, tokenizer_path):
    expect = claude_store(tmp_path / "projects")
    report, out, sessions = _export(tmp_path, tokenizer_path, claude=[tmp_path / "projects"])
    assert report.sessions == expect["sessions"] == len(sessions)
    assert report.recorded == 6 and report.exported == 6 and report.subagents == 2
    new, old = sorted(sessions, key=lambda s: -s.n_requests)
    assert all(s.provider == "claude" for s in sessions)
    assert _counts(new.main) == expect["main"]
    (sub,) = new.main.children
    assert sub.kind == "subagent" and _counts(sub) == expect["subagent"]
    assert sub.spawn == expect["subagent_spawn"] and sub.agent_id == "agent_001"
    assert [r.api_time for r in new.main.requests] == expect["api_time"]
    assert new.main.requests[1].stop == "end_turn" and new.main.requests[0].output_types == ("thinking", "tool_use")
    # the second main call repeats the first one's prompt: its hash blocks extend the first's
    first, second = new.main.requests
    assert second.hash_ids[:len(first.hash_ids)].tolist() == first.hash_ids.tolist()
    assert len(first.hash_ids) == first.isl // 64  # the unlogged head counts: the blocks cover `in`
    assert _counts(old.main) == expect["old"] and [_counts(c) for c in old.main.children] == [expect["old_subagent"]]


def test_codex_store_with_a_subagent_thread(tmp_path, tokenizer_path):
    expect = codex_store(tmp_path / "sessions")
    report, out, (session,) = _export(tmp_path, tokenizer_path, codex=[tmp_path / "sessions"])
    assert session.provider == "codex" and report.recorded == 3 and report.exported == 3
    assert _counts(session.main) == expect["main"]
    assert [r.api_time for r in session.main.requests] == expect["api_time"]
    (sub,) = session.main.children
    assert _counts(sub) == expect["subagent"] and sub.spawn == 20.0  # 21 s, from the first call at 1 s
    assert session.main.requests[0].output_types == ("thinking", "tool_use")


def test_nothing_private_leaves(tmp_path, tokenizer_path):
    claude_store(tmp_path / "projects")
    codex_store(tmp_path / "sessions")
    report, out, sessions = _export(tmp_path, tokenizer_path, claude=[tmp_path / "projects"],
                                    codex=[tmp_path / "sessions"])
    assert report.sessions == 3
    written = b"".join(p.read_bytes() for p in out.rglob("*") if p.is_file())
    for secret in PRIVATE + ("SECRET", "alice", "claude-code", "toolu_", "call_1", "msg_0"):
        assert secret.encode() not in written, secret
    assert sorted(p.name for p in (out / "traces").iterdir()) == [f"session_{n:04d}.json" for n in (1, 2, 3)]


def test_cli_and_bad_input(tmp_path, tokenizer_path):
    claude_store(tmp_path / "projects")
    bad = tmp_path / "projects" / "-home-alice-repo" / "broken.jsonl"
    bad.write_text('{"type": "user"}\n{not json\n')
    res = subprocess.run([sys.executable, "-m", "agentx.cli", "capture", "import", "--claude", str(tmp_path / "projects"),
                          "--tokenizer", str(tokenizer_path), "--out", str(tmp_path / "o")], capture_output=True, text=True)
    assert res.returncode == 2 and f"{bad}: line 2: invalid JSON" in res.stderr
    bad.unlink()
    res = subprocess.run([sys.executable, "-m", "agentx.cli", "capture", "import", "--claude", str(tmp_path / "projects"),
                          "--tokenizer", str(tokenizer_path), "--out", str(tmp_path / "o")], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert json.loads((tmp_path / "o" / "export_report.json").read_text())["exported"] == 6
    with pytest.raises(TraceError, match="timestamp: not an ISO time"):
        stamp = tmp_path / "stamp"
        claude_store(stamp)
        f = next(stamp.rglob("0b6f*.jsonl"))
        f.write_text(f.read_text().replace("2026-06-01T10:00:02.000Z", "yesterday"))
        _export(tmp_path / "x", tokenizer_path, claude=[stamp])


@pytest.mark.parametrize("store, old, new, where", [
    (claude_store, '"output_tokens": 25', '"output_tokens": "many"', "message.usage.output_tokens: Expected `int"),
    (codex_store, '"input_tokens": 9400', '"input_tokens": -3', "payload.info.last_token_usage.input_tokens"),
])
def test_hostile_usage_is_one_line_naming_file_line_and_field(tmp_path, tokenizer_path, store, old, new, where):
    store(tmp_path / "logs")
    file = next(f for f in (tmp_path / "logs").rglob("*.jsonl") if old in f.read_text())
    file.write_text(file.read_text().replace(old, new))
    kind = {"claude": [tmp_path / "logs"]} if store is claude_store else {"codex": [tmp_path / "logs"]}
    with pytest.raises(TraceError, match=rf"^{file}: line \d+: {where}"):
        _export(tmp_path, tokenizer_path, **kind)


def test_redacted_codex_text_keeps_the_recorded_counts(tmp_path, tokenizer_path):
    """Codex logs reasoning only as `encrypted_content` and may elide tool output, yet counts
    every token: the counts size the hash blocks (placeholder tokens stand for the missing text),
    and the prefix reuse the cached counts record survives."""
    expect = codex_store(tmp_path / "sessions")
    _, _, (session,) = _export(tmp_path, tokenizer_path, codex=[tmp_path / "sessions"])
    first, second = session.main.requests
    assert (first.isl, second.isl) == (expect["main"][0][0], expect["main"][1][0])
    assert [len(r.hash_ids) for r in (first, second)] == [first.isl // 64, second.isl // 64]
    assert second.hash_ids[:len(first.hash_ids)].tolist() == first.hash_ids.tolist()
    from agentx.traces.stats import session_hit_tokens

    hit, _ = session_hit_tokens(session)  # the log: 9,000 of the second call's 9,400 tokens cached
    assert hit == len(first.hash_ids) * 64 == 9000 // 64 * 64


def test_imported_logs_carry_segments(tmp_path, tokenizer_path):
    """A session log's calls get segments (SPEC §1): the unlogged head as one system segment, then
    the messages by kind; Claude Code's Grep and Codex's shell call get their tool class."""
    claude_store(tmp_path / "projects")
    codex_store(tmp_path / "sessions")
    _, _, sessions = _export(tmp_path, tokenizer_path, claude=[tmp_path / "projects"], codex=[tmp_path / "sessions"])
    requests = [r for s in sessions for r in s.requests()]
    assert requests and all(sum(g.tokens for g in r.segments) == r.isl for r in requests)
    assert all(r.segments[0].kind == "system" for r in requests)
    claude = max((s for s in sessions if s.provider == "claude"), key=lambda s: s.n_requests)
    turn = claude.main.requests[1]
    assert [g.kind for g in turn.segments] == ["system", "user", "reasoning", "tool_call", "tool_result"]
    assert turn.segments[0] == claude.main.requests[0].segments[0]  # the same head in every call of the agent
    (sub,) = claude.main.children
    assert [(g.kind, g.tool) for g in sub.requests[1].segments[2:]] == [("tool_call", "search"), ("tool_result", "search")]
    codex = next(s for s in sessions if s.provider == "codex")
    assert ("tool_result", "shell") in [(g.kind, g.tool) for g in codex.main.requests[1].segments]


def test_what_the_search_of_a_store_passes_by_is_listed_and_exits_2(tmp_path, tokenizer_path):
    """A folder named z.jsonl, a symlink loop and a symlinked folder are not read: each is a line
    (issue #46: they were passed by silently, exit 0), the sessions beside them are exported."""
    claude_store(tmp_path / "projects")
    project = tmp_path / "projects" / "-home-alice-repo"
    (project / "z.jsonl").mkdir()
    (project / "loop.jsonl").symlink_to("loop.jsonl")
    (tmp_path / "projects" / "back").symlink_to(tmp_path / "projects")
    res = subprocess.run([sys.executable, "-m", "agentx.cli", "capture", "import", "--claude", str(tmp_path / "projects"),
                          "--tokenizer", str(tokenizer_path), "--out", str(tmp_path / "o")], capture_output=True,
                         text=True, timeout=120)
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    lines = res.stderr.strip().splitlines()
    assert lines[:3] == [f"skipped {project / 'loop.jsonl'}: a symlink loop",
                         f"skipped {project / 'z.jsonl'}: a folder where a file belongs",
                         f"skipped {tmp_path / 'projects' / 'back'}: a symlinked folder (not followed: it could loop "
                         f"back)"], res.stderr
    assert lines[3] == ("error: exported 2 sessions, skipped 3 paths of the stores (listed above; in "
                        "export_report.json as skipped_files)"), res.stderr
    report = json.loads((tmp_path / "o" / "export_report.json").read_text())
    assert report["exported"] == 6 and len(report["skipped_files"]) == 3


CODEX_LOG = DATA / "codex" / "rollout-2026-05-11T11-26-55-019e1625-789d-76c0-80ab-3724b5ddb799.jsonl.gz"


def _redacted(value):
    """Every string of an item's text redacted; its kinds, roles, names and ids kept."""
    if isinstance(value, dict):
        return {k: v if k in ("type", "role", "name", "id", "call_id") else _redacted(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_redacted(v) for v in value]
    return "[redacted]" if isinstance(value, str) else value


def test_a_real_codex_log_with_its_text_redacted_keeps_its_recorded_reuse(tmp_path, tokenizer_path):
    """A real public Codex rollout (tests/data/codex: 66 calls, its reasoning encrypted as Codex
    writes it), its messages, tool calls, tool output and reasoning summaries redacted as a shared
    log is: the counts size every prompt, and each prompt extends the previous sized one (issue #47:
    the previous text matched the new one but for its closing token, the extension never fired,
    the placeholders moved to the end of every prompt: a hit rate of 0.284 here). On the calls
    where OpenAI's server reported a cache hit, the export's infinite-cache hits are within 2
    points of the recorded cached tokens; over all calls they are no fewer (17 calls after the first,
    where the server's cache missed, cannot miss in an infinite cache)."""
    lines = [json.loads(line) for line in gzip.decompress(CODEX_LOG.read_bytes()).decode().splitlines()]
    for rec in lines:
        if rec["type"] == "response_item":
            rec["payload"] = {k: _redacted(v) if k in ("content", "output", "arguments", "input", "summary", "action")
                              else v for k, v in rec["payload"].items()}
    (tmp_path / "sessions").mkdir()
    (tmp_path / "sessions" / CODEX_LOG.stem).write_text("".join(json.dumps(r) + "\n" for r in lines))
    usage = [r["payload"]["info"]["last_token_usage"] for r in lines
             if r["type"] == "event_msg" and r["payload"]["type"] == "token_count" and r["payload"]["info"]]
    report, _, (session,) = _export(tmp_path, tokenizer_path, codex=[tmp_path / "sessions"])
    assert report.exported == len(usage) == 66
    calls = sorted(session.requests(), key=lambda r: r.t)
    assert [r.isl for r in calls] == [u["input_tokens"] for u in usage]
    seen, hits = set(), []
    for r in calls:  # the leading blocks seen in an earlier call: an infinite prefix cache's hit
        ids = r.hash_ids.tolist()
        n = next((i for i, h in enumerate(ids) if h not in seen), len(ids))
        hits.append(min(n * 64, r.isl))
        seen.update(ids)
    served = [(h, r.isl, u["cached_input_tokens"]) for h, r, u in zip(hits, calls, usage) if u["cached_input_tokens"]]
    isl = sum(i for _, i, _ in served)
    assert len(served) == 48
    assert abs(sum(h for h, _, _ in served) / isl - sum(c for _, _, c in served) / isl) <= 0.02
    recorded = sum(u["cached_input_tokens"] for u in usage) / sum(r.isl for r in calls)
    assert sum(hits) / sum(r.isl for r in calls) >= recorded
