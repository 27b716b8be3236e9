import json

import numpy as np
import pytest

from agentx.content.tokens import MARKER_TOKENS, ContentConfig, PromptBuilder, parse_token_range
from agentx.content.wire import BodyBuilder, ChatText, TokensText, chat_segments, load_decoder
from agentx.errors import AgentxError
from agentx.traces.load import load_sessions
from tests.conftest import WEKA


@pytest.fixture(scope="module")
def sessions():
    return load_sessions([WEKA], None)


def test_equal_hash_ids_give_equal_blocks_and_isl_is_exact(sessions):
    b = PromptBuilder(ContentConfig(seed=3))
    s = sessions[0]
    reqs = list(s.main.requests)
    a, c = b.prompt(s, reqs[5], 1, 99), b.prompt(s, reqs[6], 2, 99)
    shared = 0
    while shared < min(len(reqs[5].hash_ids), len(reqs[6].hash_ids)) and \
            reqs[5].hash_ids[shared] == reqs[6].hash_ids[shared]:
        shared += 1
    assert shared > 10
    assert np.array_equal(a[: shared * 64], c[: shared * 64])
    assert a[shared * 64: shared * 64 + 64].tolist() != c[shared * 64: shared * 64 + 64].tolist() or \
        len(reqs[5].hash_ids) == shared
    assert len(a) == s.replay_isl(reqs[5]) and a.min() >= 1000 and a.max() < 30000
    # another marker changes only the leading tokens; another seed changes everything
    other = b.prompt(s, reqs[5], 1, 100)
    assert not np.array_equal(other[:MARKER_TOKENS], a[:MARKER_TOKENS])
    assert np.array_equal(other[MARKER_TOKENS:], a[MARKER_TOKENS:])
    assert not np.array_equal(PromptBuilder(ContentConfig(seed=4)).prompt(s, reqs[5], 1, 99)[64:128], a[64:128])


@pytest.mark.parametrize("token_range,n_sessions", [((1000, 30000), 14), ((300, 8000), 3), ((0, 151936), 3)])
def test_incremental_tokens_bodies_equal_the_tokens_on_every_real_request(sessions, token_range, n_sessions):
    b = PromptBuilder(ContentConfig(seed=1, token_range=token_range))
    builder = BodyBuilder("m", "tokens")
    bodies, head = TokensText(b, builder), builder.tokens_head(7) + b"["
    for s in sessions[:n_sessions]:
        for k, stream in enumerate(s.walk()):
            for i, r in enumerate(stream.requests):
                view, isl = bodies.body(s, r, 1000 + i, 42, 7, stream_key=(s.id, k))
                body = bytes(view)
                del view  # released: the stream's next body is written over this one
                assert body.startswith(head) and body.endswith(b"]}") and isl == s.replay_isl(r)
                got = np.array(body[len(head):-2].split(b","), dtype=np.int64)  # fixed-width items
                assert np.array_equal(got, b.prompt(s, r, 1000 + i, 42))
            doc = json.loads(body)  # (valid JSON: checked on each stream's last body)
            assert doc["prompt"] == got.tolist() and doc["max_tokens"] == 7 and doc["model"] == "m"
            bodies.forget((s.id, k))


def test_a_body_still_in_use_is_never_rewritten(sessions):
    b = PromptBuilder(ContentConfig())
    bodies, s = TokensText(b, BodyBuilder("m", "tokens")), sessions[0]
    r1, r2, r3 = s.main.requests[4:7]
    first, _ = bodies.body(s, r1, 1, 2, 9, stream_key="main")
    kept = bytes(first)
    second, _ = bodies.body(s, r2, 1, 2, 1, stream_key="main")  # `first` is still being sent
    assert bytes(first) == kept and json.loads(bytes(second))["max_tokens"] == 1
    del first, second
    third, _ = bodies.body(s, r3, 1, 2, 9, stream_key="main")
    assert json.loads(bytes(third))["prompt"] == b.prompt(s, r3, 1, 2).tolist()


def test_json_array_is_valid_json(sessions):
    b = PromptBuilder(ContentConfig())
    s = sessions[0]
    tokens = b.prompt(s, s.main.requests[3], 7, 8)
    assert json.loads(b"[" + bytes(b.text(tokens))[1:] + b"]") == tokens.tolist()  # its first comma dropped


def test_token_scale_keeps_structure_in_fewer_tokens(sessions):
    s = sessions[0]
    r = s.main.requests[10]
    b = PromptBuilder(ContentConfig(token_scale=64))
    p = b.prompt(s, r, 1, 2)
    assert len(p) == max(1, round(s.replay_isl(r) / 64)) and b.block_tokens(s) == 1
    assert b.osl(r) == max(1, round(r.osl / 64))


def test_token_range_parsing():
    assert parse_token_range("300:8000") == (300, 8000)
    for bad in ("8000:300", "x", "1:2:3"):
        with pytest.raises(AgentxError, match="want") as info:
            parse_token_range(bad)
        assert info.value.setting == "token_range"  # the CLI words it as --token-range


def test_chat_segments_follow_the_streams_turns():
    segs = chat_segments(1000, 100, [(300, 50), (600, 80)])
    assert [(g.role, g.start, g.end) for g in segs] == [
        ("system", 0, 100), ("user", 100, 300), ("assistant", 300, 350), ("user", 350, 600),
        ("assistant", 600, 680), ("user", 680, 1000)]
    assert [g.role for g in chat_segments(50, 0, [])] == ["user"]


def test_prompt_from_a_position_is_the_prompts_tail(sessions):
    b = PromptBuilder(ContentConfig(seed=2, token_scale=4))
    s = sessions[1]
    for r in list(s.main.requests)[:20]:
        full = b.prompt(s, r, 5, 6)
        for start in (0, 1, 3, 15, 16, 17, len(full) // 2, len(full) - 1, len(full)):
            assert np.array_equal(b.prompt(s, r, 5, 6, start), full[start:])


def test_chat_text_decodes_each_block_once(sessions):
    """Chat mode renders a message from cached block texts: with the sim's tokenizer (one word
    per token) that equals decoding the whole segment, turn after turn, while only blocks not
    seen before (and the pieces segment boundaries cut) are decoded."""
    b = PromptBuilder(ContentConfig(seed=1))
    decoder = load_decoder(None)
    chat, total = ChatText(b, decoder), 0
    for s in sessions[:4]:
        for stream in s.walk():
            for i, r in enumerate(stream.requests):
                isl = b.isl(s, r)
                history = [(b.isl(s, q), b.osl(q)) for q in stream.requests[:i]]
                segments = chat_segments(isl, 500, history)
                prompt = b.prompt(s, r, 100 + i, 9)
                assert chat.messages(s, r, 100 + i, 9, segments) == [decoder(prompt[g.start:g.end].tolist())
                                                                      for g in segments]
                total += isl
    assert chat.decoded_tokens < total / 10
    body = json.loads(BodyBuilder("m", "chat", decoder).chat_body(segments, ["a", "b"], 5))
    assert [m["role"] for m in body["messages"]] == [g.role for g in segments[:2]] and body["max_tokens"] == 5
    tiny = ChatText(b, decoder, budget_bytes=1)  # past the budget, old blocks go
    r = sessions[0].main.requests[3]
    tiny.messages(sessions[0], r, 1, 9, chat_segments(b.isl(sessions[0], r), 0, []))
    assert len(tiny._texts) == 1
