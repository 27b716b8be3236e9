"""The simulated engine's API bodies (`engine/api.py`) on their own: requests decoded and refused as
vLLM would, and each response shape's stream saying what its one-shot body says."""

import json

import msgspec
import pytest

from agentx.engine.api import (AnthropicShape, BadRequest, ChatRequest, CompletionRequest, MessagesRequest,
                               OpenAIShape, forced_tool, parse, usage)
from agentx.engine import api
from agentx.replay.http.stream import Result, openai_event

WORDS = [" the", " answer", " is", " 42"]  # the sim's words need no escaping inside a JSON string (tokenizer.word)


def events(stream: bytes) -> list[bytes]:
    return [e for e in stream.split(b"\n\n") if e]


def openai_stream(shape: OpenAIShape, u: dict, reasoning: int = 0) -> bytes:
    frames = [shape.open(u["prompt_tokens"], 3)]
    frames += [shape.reasoning_frame(msgspec.json.encode(w)) for w in WORDS[:reasoning]]
    frames += [shape.token_frame(msgspec.json.encode(w)) for w in WORDS]
    return b"".join(frames) + shape.close("stop", u, include_usage=True)


@pytest.mark.parametrize("chat", [False, True])
def test_an_openai_stream_parses_to_what_its_full_body_says(chat):
    u = usage(100, len(WORDS), 3)
    shape = OpenAIShape("r1", "m", 7, chat)
    res = Result(start=0.0)
    done = [openai_event(e, 1.0, res, False) for e in events(openai_stream(shape, u, reasoning=2 if chat else 0))]
    assert done[-1] and not any(done[:-1])  # only [DONE] ends it
    full = json.loads(shape.full_body("".join(WORDS), "stop", u))
    assert full["object"] == ("chat.completion" if chat else "text_completion") and full["usage"] == u
    assert res.chunks == len(WORDS) + (2 if chat else 0) and res.reasoning_chunks == (2 if chat else 0)
    assert (res.prompt_tokens, res.completion_tokens, res.cached_tokens) == (100, len(WORDS), 3)
    assert res.finish_reason == full["choices"][0]["finish_reason"] == "stop"


def test_a_forced_tool_call_streams_arguments_that_join_into_its_json():
    shape = OpenAIShape("r2", "m", 7, chat=True, tool="search")
    stream = openai_stream(shape, usage(10, len(WORDS), 0))
    args, reasons = "", []
    for e in events(stream)[:-1]:
        choice = (json.loads(e[len(b"data: "):])["choices"] or [{}])[0]
        for call in choice.get("delta", {}).get("tool_calls", []):
            args += call["function"]["arguments"]
        reasons.append(choice.get("finish_reason"))
    assert json.loads(args) == {"text": "".join(WORDS)} and reasons[-2] == "tool_calls"
    full = json.loads(shape.full_body("".join(WORDS), "stop", {}))
    assert json.loads(full["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"]) == json.loads(args)


@pytest.mark.parametrize("tool", [None, "search"])
def test_an_anthropic_stream_joins_into_its_full_body(tool):
    shape = AnthropicShape("r3", "m", tool)
    u = AnthropicShape.usage(100, len(WORDS), 30)
    assert u["input_tokens"] + u["cache_read_input_tokens"] == 100
    stream = shape.open(100, 30) + b"".join(shape.token_frame(msgspec.json.encode(w)) for w in WORDS)
    stream += shape.close("stop", u, True)
    parsed = [json.loads(e.split(b"\ndata: ", 1)[1]) for e in events(stream)]
    assert [p["type"] for p in parsed][:2] == ["message_start", "content_block_start"]
    assert parsed[-1]["type"] == "message_stop"
    deltas = [p["delta"] for p in parsed if p["type"] == "content_block_delta"]
    joined = "".join(d.get("partial_json", d.get("text", "")) for d in deltas)
    full = json.loads(shape.full_body("".join(WORDS), "stop", u))
    block = full["content"][0]
    if tool:
        assert block == {"type": "tool_use", "id": "toolu_r3", "name": "search", "input": json.loads(joined)}
        assert full["stop_reason"] == "tool_use"
    else:
        assert block == {"type": "text", "text": joined} and full["stop_reason"] == "end_turn"
    assert json.loads(shape.full_body("x", "length", u))["stop_reason"] == "max_tokens"


def test_requests_are_decoded_and_what_no_engine_takes_is_refused():
    req = parse(CompletionRequest, b'{"prompt": [1, 2, 3], "max_tokens": 5, "stream": true}')
    assert req.prompt == [1, 2, 3] and req.max_tokens == 5 and req.stream
    chat = parse(ChatRequest, b'{"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]}')
    assert chat.messages[0].content[0]["text"] == "hi"
    refused = [
        (CompletionRequest, b'{"prompt": [1], "max_tokens": 0}', None),
        (CompletionRequest, b'{"prompt": [1], "n": 2}', "n"),
        (CompletionRequest, b'{"prompt": [1], "temperature": -1}', "temperature"),
        (CompletionRequest, b'{"prompt": [1], "top_p": 0}', "top_p"),
        (CompletionRequest, b'{"prompt": [1], "top_k": -2}', "top_k"),
        (CompletionRequest, b'{"prompt": [1]', None),
        (CompletionRequest, b'\xff\xfe', None),
        (ChatRequest, b'{"messages": []}', None),
        (ChatRequest, b'{"messages": [{"role": "user", "content": [{"type": "video"}]}]}', "messages[0].content[0].type"),
        (ChatRequest, b'{"messages": [{"role": "user", "content": [{"type": "text", "text": 3}]}]}',
         "messages[0].content[0].text"),
        (MessagesRequest, b'{"messages": [{"role": "user", "content": "hi"}]}', None),  # max_tokens is required
        (MessagesRequest, b'{"max_tokens": 9, "messages": [{"role": "user", "content": "hi"}], '
                          b'"system": [{"type": "image"}]}', "system[0].type"),
    ]
    for cls, body, param in refused:
        with pytest.raises(BadRequest) as e:
            parse(cls, body)
        assert e.value.status == 400 and e.value.param == param, body
        assert json.loads(e.value.body())["error"]["param"] == param


def test_the_forced_tool_of_either_api():
    openai_tools = [{"type": "function", "function": {"name": "a"}}, {"type": "function", "function": {"name": "b"}}]
    assert forced_tool(openai_tools, None) is None and forced_tool(openai_tools, "auto") is None
    assert forced_tool(openai_tools, {"type": "function", "function": {"name": "b"}}) == "b"
    assert forced_tool(openai_tools, "required") == "a"
    assert forced_tool([{"name": "x"}], {"type": "tool", "name": "x"}) == "x"  # Anthropic's
    assert forced_tool([{"name": "x"}], {"type": "any"}) == "x"
    for tools, choice in [(openai_tools, {"type": "function", "function": {"name": "zz"}}), ([], "required"),
                          ([{"function": {}}], None), (openai_tools, {"type": "sometimes"})]:
        with pytest.raises(BadRequest):
            forced_tool(tools, choice)


def test_token_ids_are_checked_against_the_vocabulary_as_they_are_decoded():
    """`parse_completion` answers as the plain parse then a pass over the ids did: the same
    request, or the same error (the schema's first, then the first id out of the vocabulary)."""
    vocab = 1000

    def plain(body: bytes):
        req = api.parse(api.CompletionRequest, body)
        bad = None if isinstance(req.prompt, str) else next((t for t in req.prompt if not 0 <= t < vocab), None)
        if bad is not None:
            raise api.BadRequest(f"Token id {bad} is out of vocabulary (valid ids are 0 to {vocab - 1})", param="prompt")
        return req

    def outcome(parse, body: bytes):
        try:
            req = parse(body)
        except api.BadRequest as e:
            return "error", str(e), e.param, e.status
        return "ok", req.prompt, req.max_tokens, isinstance(req, api.CompletionRequest)

    bodies = [{"prompt": [1, 2, 999], "max_tokens": 5}, {"prompt": [1, 1000, 3]}, {"prompt": [4, -1]}, {"prompt": "text"},
              {"prompt": [1, 5000], "n": 2}, {"prompt": [1, 5000], "max_tokens": 0}, {"prompt": [1.5]},
              {"prompt": [1], "temperature": -1}, {"prompt": [10**30]}, {}]
    for body in [json.dumps(b).encode() for b in bodies] + [b"{bad", b"\xff"]:
        assert outcome(lambda b: api.parse_completion(b, vocab), body) == outcome(plain, body)
    assert outcome(lambda b: api.parse_completion(b, vocab), b'{"prompt": [1, 1000, 3]}')[1].startswith("Token id 1000")
