"""Incremental tokenization equals full tokenization: on every transition of the recorded
sessions, and on adversarial edits (cuts inside words, whitespace runs, multi-byte characters)."""

import json

from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer

from agentx.capture.canonical import prompt_of
from agentx.capture.incremental import IncrementalTokenizer, common_prefix
from agentx.capture.recordings import read_rows


def test_every_recorded_transition(captured, tokenizer_path):
    tok = IncrementalTokenizer(Tokenizer.from_file(str(tokenizer_path)))
    transitions = 0
    for row in read_rows(captured["store"]):
        if row.status != 200:
            continue
        prompt = prompt_of(row.api, json.loads(row.request_body))
        text = prompt.canonical()
        key = (row.session_id, row.agent_id, prompt.conversation)
        transitions += key in tok._last
        assert tok.encode(key, text).tolist() == tok.full(text).tolist()
    assert transitions >= 20
    assert tok.chars_tokenized < tok.chars_total * 0.75  # about half the text was tokenized


PIECES = st.sampled_from(["agent", " tool", "  ", "\n", "\n\n", " ", "é", "中文", "🙂", "123", "4567", "{\"a\":",
                          "\"}", "]}", ",", "'s", " x", "\t", "read_file", "Überall", "..."])
TEXT = st.lists(PIECES, max_size=80).map("".join)


@settings(max_examples=300, deadline=None)
@given(first=TEXT, cut=st.floats(0, 1), suffix=TEXT, third=TEXT)
def test_arbitrary_edits(tokenizer_path, first, cut, suffix, third):
    tok = IncrementalTokenizer(Tokenizer.from_file(str(tokenizer_path)))
    second = first[: int(len(first) * cut)] + suffix
    for text in (first, second, second + third, third):
        assert tok.encode("s", text).tolist() == tok.full(text).tolist(), text


@given(a=TEXT, b=TEXT)
def test_common_prefix(a, b):
    n = common_prefix(a, b)
    assert a[:n] == b[:n] and (n == min(len(a), len(b)) or a[n] != b[n])
