"""The simulated engine's answers: a function of the prompt, silent cache corruption, reasoning
streams and the identity it publishes (a real server process, real clients)."""

import json
import urllib.request

import openai
import pytest

from agentx import __version__
from agentx.engine import presets
from agentx.engine.core import output_token, prompt_digest
from agentx.engine.kvcache import block_hashes
from agentx.engine.launch import sim_server
from agentx.engine.tokenizer import Tokenizer
from tests.engine.test_server import MODEL, metrics, post

PROMPT = list(range(100, 400))  # 300 tokens: 18 full blocks of 16


def completion(base: str, prompt: list[int], n: int = 8) -> dict:
    status, body = post(base, "/v1/completions", {"prompt": prompt, "max_tokens": n, "ignore_eos": True})
    assert status == 200, body
    return body


@pytest.fixture(scope="module")
def base():
    with sim_server("--speed", "50") as url:
        yield url


def test_outputs_are_a_function_of_the_prompt_only(base):
    cold = completion(base, PROMPT)
    warm = completion(base, PROMPT)  # its prefix is cached now
    other = completion(base, PROMPT[:-1] + [7])
    assert cold["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    assert warm["usage"]["prompt_tokens_details"]["cached_tokens"] == 288  # 18 blocks of 16: the last token is computed
    assert warm["choices"][0]["text"] == cold["choices"][0]["text"]
    assert other["choices"][0]["text"] != cold["choices"][0]["text"]
    # the text is the tokenizer's rendering of tokens computed from the prompt's digest
    vocab = presets.model("qwen3-235b-a22b").vocab
    digest = prompt_digest(PROMPT, block_hashes(PROMPT, 16), 16)
    assert cold["choices"][0]["text"] == Tokenizer(vocab).decode([output_token(digest, i, vocab) for i in range(8)])


def test_corrupt_fault_changes_only_answers_that_read_cached_blocks(tmp_path):
    log = tmp_path / "truth.jsonl"
    with sim_server("--speed", "50", "--fault-rate", "1", "--fault-kinds", "corrupt", "--truth-log", str(log)) as base:
        cold = completion(base, PROMPT)
        warm = completion(base, PROMPT)
        m = metrics(base)
    assert warm["usage"]["prompt_tokens_details"]["cached_tokens"] > 0
    assert warm["choices"][0]["text"] != cold["choices"][0]["text"]  # silent: a 200 with a full answer
    assert len(warm["choices"][0]["text"].split()) == 8 and warm["choices"][0]["finish_reason"] == "length"
    assert "vllm:request_errors_total" not in m  # the server does not know
    statuses = [rec["status"] for rec in map(json.loads, log.read_text().splitlines()) if "stall" not in rec]
    assert statuses == ["length", "corrupt"]  # the cold one read nothing from the cache


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
def test_chat_streams_a_share_of_the_answer_as_reasoning_first(field):
    with sim_server("--speed", "50", "--reasoning-share", "0.25", "--reasoning-field", field) as base:
        api = openai.OpenAI(base_url=base + "/v1", api_key="unused", max_retries=0)
        stream = api.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "think first"}], max_tokens=20,
            extra_body={"ignore_eos": True}, stream=True, stream_options={"include_usage": True})
        kinds, usage = [], None
        for chunk in stream:
            if chunk.usage:
                usage = chunk.usage
            for c in chunk.choices:
                extra = c.delta.model_extra or {}
                if extra.get(field):
                    kinds.append("reasoning")
                elif c.delta.content:
                    kinds.append("content")
        whole = api.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "think first"}],
                                            max_tokens=20, extra_body={"ignore_eos": True})
    assert kinds == ["reasoning"] * 5 + ["content"] * 15  # one token per event
    assert usage.completion_tokens == 20  # reasoning counts as output, as in vLLM
    message = whole.choices[0].message
    assert len(message.model_extra[field].split()) == 5 and len(message.content.split()) == 15


def test_version_names_the_engine(base):
    with urllib.request.urlopen(base + "/version") as r:
        body = json.loads(r.read())
    config = body.pop("config")  # the whole config, for bench's twin (tests/virtual/test_twin.py)
    assert config["version"] == 1 and config["deployment"]["engine"]["hardware"] == "H200"
    assert body == {"version": __version__, "engine": "agentx-sim", "precision": "bf16",
                    "engine_settings": "H200 x8 qwen3-235b-a22b bf16"}  # every setting that changes performance
