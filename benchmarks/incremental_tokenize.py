"""Incremental vs full tokenization of one long agent session, per turn (issue #5).

An agent resends its whole history every turn. A synthetic Anthropic-style session (a system
prompt, tool definitions, then turns of an assistant tool call and a tool result of ~2.5k
tokens) grows to AgentX lengths; each turn's canonical prompt text is tokenized in full and
incrementally (`agentx.capture.incremental`), with a byte-level BPE trained here on the session's
own text (nothing downloaded). Prints the time per turn at several context lengths and checks
that both give the same ids. (TensorRT-LLM reported 185 ms -> 11 ms per turn at AgentX lengths.)

    python benchmarks/incremental_tokenize.py [--turns 100] [--vocab 32000]

(Not `tokenize.py`, the name the issue used: a script of that name in benchmarks/ shadows the
standard library's `tokenize` for every script there, which breaks `inspect`.)
"""

from __future__ import annotations

import argparse
import random
import time

import numpy as np
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from agentx.capture.canonical import prompt_of
from agentx.capture.incremental import IncrementalTokenizer

SYLLABLES = ("ka ri to na me so lu chi ve pa do ne ti ro ma ze fu gi la be mo sa ku de ni ho ya te wa po "
             "str int def cls get set add run log err val res out arg cfg buf idx num len map key obj").split()
PUNCT = ("", "", "", "", ",", ".", "()", "_", "\n", ":\n    ", " = ", "(", ")", "[0]", "/")


def text(rng: random.Random, n: int) -> str:
    """n words of code-like text over a large made-up vocabulary (so BPE learns many merges)."""
    out = []
    for _ in range(n):
        word = "".join(rng.choice(SYLLABLES) for _ in range(rng.choice((1, 1, 2, 2, 3, 4))))
        out.append(word + rng.choice(PUNCT))
    return " ".join(out)


def session(turns: int, seed: int = 0) -> list[dict]:
    rng = random.Random(seed)
    tools = [{"name": f"Tool{i}", "description": text(rng, 120), "input_schema": {"type": "object"}} for i in range(12)]
    body = {"system": text(rng, 2500), "tools": tools, "messages": [{"role": "user", "content": text(rng, 300)}]}
    bodies = []
    for turn in range(turns):
        bodies.append({**body, "messages": list(body["messages"])})
        call = {"type": "tool_use", "id": f"toolu_{turn:04d}", "name": "Tool1", "input": {"cmd": text(rng, 20)}}
        body["messages"].append({"role": "assistant", "content": [{"type": "text", "text": text(rng, 60)}, call]})
        result = {"type": "tool_result", "tool_use_id": call["id"], "content": text(rng, 1800)}
        body["messages"].append({"role": "user", "content": [result]})
    return bodies


def train(sample: str, vocab: int) -> Tokenizer:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator([sample[i:i + 5000] for i in range(0, len(sample), 5000)], trainer)
    return tok


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--turns", type=int, default=100)
    ap.add_argument("--vocab", type=int, default=32000)
    args = ap.parse_args()
    texts = [prompt_of("messages", b).canonical() for b in session(args.turns)]
    tokenizer = train(texts[-1][:2_000_000], args.vocab)
    inc = IncrementalTokenizer(tokenizer)
    rows = []
    for i, t in enumerate(texts):
        t0 = time.perf_counter()
        full = inc.full(t)
        t1 = time.perf_counter()
        ids = inc.encode("session", t)
        t2 = time.perf_counter()
        if not np.array_equal(full, ids):
            raise SystemExit(f"turn {i}: incremental ids differ from full tokenization")
        rows.append((len(full), (t1 - t0) * 1000, (t2 - t1) * 1000))
    print(f"one session, {args.turns} turns, byte-level BPE with {tokenizer.get_vocab_size():,} tokens, "
          "ids equal on every turn")
    print(f"{'context tokens':>16} {'turns':>6} {'full ms/turn':>13} {'incremental ms/turn':>20} {'speed-up':>9}")
    edges = [0, 25_000, 50_000, 100_000, 150_000, 200_000, 300_000, 10**9]
    for lo, hi in zip(edges, edges[1:]):
        sel = [r for r in rows[1:] if lo <= r[0] < hi]
        if not sel:
            continue
        full_ms = float(np.mean([r[1] for r in sel]))
        inc_ms = float(np.mean([r[2] for r in sel]))
        label = f"{lo // 1000}k-{hi // 1000}k" if hi < 10**9 else f">= {lo // 1000}k"
        print(f"{label:>16} {len(sel):>6} {full_ms:>13.1f} {inc_ms:>20.1f} {full_ms / inc_ms:>8.1f}x")
    total_full, total_inc = sum(r[1] for r in rows), sum(r[2] for r in rows)
    print(f"{'whole session':>16} {len(rows):>6} {total_full / len(rows):>13.1f} {total_inc / len(rows):>20.1f} "
          f"{total_full / total_inc:>8.1f}x")


if __name__ == "__main__":
    main()
