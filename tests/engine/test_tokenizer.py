import random

from agentx.engine.tokenizer import Tokenizer, render_chat, word


def test_words_are_bijective_base_26():
    assert [word(i) for i in (0, 25, 26, 27, 701, 702)] == [" a", " z", " aa", " ab", " zz", " aaa"]


def test_decode_then_encode_is_exact_for_any_ids():
    tok = Tokenizer(151_936)
    rng = random.Random(7)
    for n in (1, 17, 4_096):
        ids = [rng.randrange(151_936) for _ in range(n)]
        assert tok.encode(tok.decode(ids)) == ids


def test_any_text_gets_a_deterministic_in_vocab_encoding():
    text = "Hello world, this is 12345 tokens!\n\n  def f(x): return x ** 2  # ok\tdone"
    a, b = Tokenizer(32_000).encode(text), Tokenizer(32_000).encode(text)
    assert a == b and all(0 <= t < 32_000 for t in a)
    assert 15 < len(a) < 60  # roughly a token per word or punctuation run


def test_chat_content_keeps_its_tokens_inside_the_template():
    tok = Tokenizer(151_936)
    ids = list(range(5000, 5100))
    empty = len(tok.encode(render_chat([{"role": "user", "content": ""}])))
    full = tok.encode(render_chat([{"role": "user", "content": tok.decode(ids)}]))
    assert len(full) == empty + 100
    parts = render_chat([{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}])
    assert "ab<|im_end|>" in parts
    assert render_chat([], tools=[{"type": "function"}]).startswith("<|im_start|>system\n# Tools\n")
