"""Small synthetic Claude Code and Codex session stores, written in the shapes those agents use
(as TraceLab's extractors read them). Never anyone's real history: every string is made up here,
and the private ones are listed so tests can check none of them leaves an export."""

import json
from pathlib import Path

PRIVATE = ("SECRET_TOKEN_123", "sk-SECRETKEY", "/home/alice", "0b6f1d2e-aaaa-4bbb-8ccc-123456789abc",
           "agent-a1", "a1b2c3", "thr-main-7781", "thr-child-9912", "parse_config", "flaky_test_name")


def _ts(seconds: float) -> str:
    return f"2026-06-01T10:{int(seconds // 60):02d}:{seconds % 60:06.3f}Z"


def _write(path: Path, records: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def _user(sid, uuid, parent, t, content, **extra):
    return {"type": "user", "sessionId": sid, "uuid": uuid, "parentUuid": parent, "timestamp": _ts(t),
            "cwd": "/home/alice/repo", "message": {"role": "user", "content": content}, **extra}


def _assistant(sid, uuid, parent, t, mid, block, usage, stop=None, model="claude-sonnet-4-5", **extra):
    return {"type": "assistant", "sessionId": sid, "uuid": uuid, "parentUuid": parent, "timestamp": _ts(t),
            "requestId": "req_" + mid, "cwd": "/home/alice/repo",
            "message": {"id": mid, "role": "assistant", "model": model, "content": [block],
                        "stop_reason": stop, "usage": usage}, **extra}


def _usage(fresh, write, read, out):
    return {"input_tokens": fresh, "cache_creation_input_tokens": write, "cache_read_input_tokens": read,
            "output_tokens": out}


def claude_store(root: Path) -> dict:
    """Two sessions: one with a subagent in its own file (current layout), one with an old-style
    sidechain subagent inside the session file. Returns what the files say."""
    sid = "0b6f1d2e-aaaa-4bbb-8ccc-123456789abc"
    project = root / "-home-alice-repo"
    u1 = _usage(3, 12000, 0, 10)
    main = [
        {"type": "summary", "summary": "parse_config fix", "leafUuid": "x"},
        _user(sid, "u1", None, 0, "Fix parse_config, the key is SECRET_TOKEN_123 in /home/alice/repo/app.py"),
        _assistant(sid, "a1", "u1", 2, "msg_01", {"type": "thinking", "thinking": "look at parse_config",
                                                  "signature": "sig"}, u1),
        _assistant(sid, "a2", "a1", 3, "msg_01", {"type": "tool_use", "id": "toolu_1", "name": "Task",
                                                  "input": {"prompt": "find flaky_test_name"}},
                   _usage(3, 12000, 0, 40), "tool_use"),
        _user(sid, "u2", "a2", 10, [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "found it"}],
              toolUseResult={"durationMs": 6000}),
        _assistant(sid, "a3", "u2", 12, "msg_02", {"type": "text", "text": "Fixed parse_config."},
                   _usage(2, 500, 12000, 25), "end_turn"),
        _assistant(sid, "a4", "a3", 12.5, "msg_err", {"type": "text", "text": "API Error"},
                   _usage(0, 0, 0, 0), "stop_sequence", model="<synthetic>"),
    ]
    sub = {"isSidechain": True, "agentId": "a1b2c3"}
    subagent = [
        _user(sid, "s1", None, 4, "find flaky_test_name", **sub),
        _assistant(sid, "s2", "s1", 6, "msg_s1", {"type": "tool_use", "id": "toolu_2", "name": "Grep",
                                                  "input": {"pattern": "flaky_test_name"}},
                   _usage(5, 8000, 0, 30), "tool_use", **sub),
        _user(sid, "s3", "s2", 7, [{"type": "tool_result", "tool_use_id": "toolu_2", "content": "tests/x.py"}], **sub),
        _assistant(sid, "s4", "s3", 9, "msg_s2", {"type": "text", "text": "It is in tests/x.py"},
                   _usage(5, 200, 8000, 20), "end_turn", **sub),
    ]
    _write(project / f"{sid}.jsonl", main)
    _write(project / sid / "subagents" / "agent-a1b2c3.jsonl", subagent)
    old = "11111111-2222-4333-8444-555555555555"
    side = {"isSidechain": True}
    _write(project / f"{old}.jsonl", [
        _user(old, "o1", None, 100, "hello"),
        _assistant(old, "o2", "o1", 101, "msg_o1", {"type": "text", "text": "hi"}, _usage(4, 9000, 0, 5), "end_turn"),
        _user(old, "o3", None, 102, "side task", **side),
        _assistant(old, "o4", "o3", 103, "msg_o2", {"type": "text", "text": "done"}, _usage(4, 7000, 0, 6),
                   "end_turn", **side),
    ])
    return {"sessions": 2, "main": [(12003, 40), (12502, 25)], "subagent": [(8005, 30), (8205, 20)],
            "api_time": [3.0, 2.0], "subagent_spawn": 4.0, "old": [(9004, 5)], "old_subagent": [(7004, 6)]}


def _item(t, payload):
    return {"timestamp": _ts(t), "type": "response_item", "payload": payload}


def _tokens(t, fresh, cached, out):
    return {"timestamp": _ts(t), "type": "event_msg", "payload": {"type": "token_count", "info": {
        "last_token_usage": {"input_tokens": fresh + cached, "cached_input_tokens": cached, "output_tokens": out,
                             "reasoning_output_tokens": out // 2}}}}


def codex_store(root: Path) -> dict:
    """A main thread with two calls and a subagent thread whose file first replays its parent."""
    day = root / "2026" / "06" / "01"
    meta = {"timestamp": _ts(0), "type": "session_meta", "payload": {
        "id": "thr-main-7781", "cwd": "/home/alice/repo", "instructions": "You are a coding agent.",
        "source": "cli", "originator": "codex_cli_rs"}}
    user = _item(1, {"type": "message", "role": "user", "content": [
        {"type": "input_text", "text": "run the tests; token sk-SECRETKEY"}]})
    main = [
        meta,
        {"timestamp": _ts(0.5), "type": "turn_context", "payload": {"model": "gpt-5-codex", "cwd": "/home/alice/repo"}},
        user,
        _item(3, {"type": "reasoning", "summary": [], "encrypted_content": "gAAAAB-opaque"}),
        _item(4, {"type": "function_call", "name": "shell", "arguments": "{\"command\":[\"pytest\"]}",
                  "call_id": "call_1"}),
        _tokens(4.2, 9000, 0, 120),
        _item(9, {"type": "function_call_output", "call_id": "call_1", "output": "1 failed: flaky_test_name"}),
        _item(11, {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "one test fails"}]}),
        _tokens(11.5, 400, 9000, 30),
    ]
    child = [
        {"timestamp": _ts(20), "type": "session_meta", "payload": {
            "id": "thr-child-9912", "cwd": "/home/alice/repo", "source": {"subagent": {"thread_spawn": {
                "parent_thread_id": "thr-main-7781", "depth": 1}}}}},
        dict(meta, timestamp=_ts(20)),
        user,
        _tokens(20, 9000, 0, 120),  # a replayed count: not a call of the child
        {"timestamp": _ts(21), "type": "turn_context", "payload": {"model": "gpt-5-codex"}},
        _item(21, {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "look at flaky_test_name"}]}),
        _item(24, {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "it races"}]}),
        _tokens(24.5, 3000, 0, 15),
    ]
    _write(day / "rollout-2026-06-01T10-00-00-thr-main-7781.jsonl", main)
    _write(day / "rollout-2026-06-01T10-00-20-thr-child-9912.jsonl", child)
    return {"main": [(9000, 120), (9400, 30)], "subagent": [(3000, 15)], "api_time": [3.2, 2.5]}
