"""A small byte-level BPE tokenizer trained here on text this file holds (nothing downloaded)."""

from __future__ import annotations

import random
from pathlib import Path

from tokenizers import Tokenizer, models, pre_tokenizers, decoders, trainers

PARAGRAPH = """\
The agent reads the repository, runs the tests and edits the files that fail. Each tool call
returns its output to the model, which decides what to do next: read another file, search for
a symbol, run a command, or answer the user. Long sessions keep the whole history in context,
so every turn resends the system prompt, the tool definitions and all earlier messages.
def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description="count lines")
    for path in argv: print(path, sum(1 for _ in open(path)))
    return 0
{"type": "tool_result", "tool_use_id": "toolu_01", "content": "ok"}
"""

WORDS = ("agent tool file test run read write search symbol model answer user context system prompt message "
         "history session cache token block prefix request response stream error value result output input "
         "function class import return print path line number string list dict key index count time").split()


def words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def train_tokenizer(path: Path, vocab_size: int = 1200) -> Path:
    """Write a tokenizer.json to `path` and return it."""
    rng = random.Random(0)
    corpus = [PARAGRAPH] * 20 + [words(rng, 60) for _ in range(400)]
    corpus += ['{"role":"user","content":[{"type":"text","text":"' + words(rng, 12) + '"}]}' for _ in range(200)]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(corpus, trainer)
    tok.save(str(path))
    return path


if __name__ == "__main__":  # `python tests/capture/tokenizer.py tokenizer.json`: a tokenizer to try capture with
    import sys

    print(train_tokenizer(Path(sys.argv[1] if len(sys.argv) > 1 else "tokenizer.json")))
