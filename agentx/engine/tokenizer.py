"""The simulated engine's built-in tokenizer: deterministic, dependency-free, token-exact.

Token id i is the word " " + w(i), where w is bijective base 26 over a-z (0 -> "a",
25 -> "z", 26 -> "aa", ...). Text splits into pieces like a GPT-2 pre-tokenizer (an optional
space and a run of letters, digits or punctuation, or whitespace); a piece that is such a word
with an id inside the vocabulary encodes to that id, any other piece to a stable hash of it.
So `encode(decode(ids)) == ids` for every id list (what the replayer relies on in text and chat
mode), and arbitrary text gets a realistic, deterministic token count (~1 token per word).
"""

from __future__ import annotations

import json
import re
import zlib

PIECE = re.compile(r" ?[a-z]+| ?[A-Za-z]+| ?\d{1,3}| ?[^\sA-Za-z\d]+|\s+(?!\S)|\s+")
_WORD = re.compile(r" [a-z]+")
_CACHE_LIMIT = 1 << 20


def word(token_id: int) -> str:
    """The text of one token: a space and a lowercase word."""
    n, letters = token_id + 1, []
    while n:
        n, r = divmod(n - 1, 26)
        letters.append(chr(97 + r))
    return " " + "".join(reversed(letters))


def _word_value(piece: str) -> int:
    n = 0
    for ch in piece[1:]:
        n = n * 26 + (ord(ch) - 96)
    return n - 1


class Tokenizer:
    def __init__(self, vocab: int):
        self.vocab = vocab
        self._ids: dict[str, int] = {}
        self._words: dict[int, str] = {}
        self._json: dict[int, bytes] = {}

    def _piece_id(self, piece: str) -> int:
        tid = self._ids.get(piece)
        if tid is None:
            tid = -1
            if len(piece) <= 8 and _WORD.fullmatch(piece):
                tid = _word_value(piece)
            if not 0 <= tid < self.vocab:
                tid = zlib.crc32(piece.encode()) % self.vocab
            if len(self._ids) > _CACHE_LIMIT:
                self._ids.clear()
            self._ids[piece] = tid
        return tid

    def encode(self, text: str) -> list[int]:
        piece_id = self._piece_id
        return [piece_id(p) for p in PIECE.findall(text)]

    def decode(self, ids) -> str:
        words = self._words
        out = []
        for t in ids:
            w = words.get(t)
            if w is None:
                w = words[t] = word(t)
            out.append(w)
        return "".join(out)


    def json_word(self, token_id: int) -> bytes:
        """The token's text as a JSON string (what a streamed token frame carries)."""
        j = self._json.get(token_id)
        if j is None:
            j = self._json[token_id] = f'"{word(token_id)}"'.encode()
        return j


def message_text(content) -> str:
    """The text of a message's content: a string, or its parts (text as is, others as JSON)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(_part_text(part) for part in content if isinstance(part, dict))


def _part_text(part: dict) -> str:
    if part.get("type", "text") == "text":
        return part.get("text", "")
    return json.dumps(part, sort_keys=True)


def render_chat(messages: list[dict], tools: list | None = None, system=None) -> str:
    """A ChatML rendering of a conversation, ending with the assistant's turn opening.

    `system` is the Anthropic-style top-level system prompt (a string or text blocks).
    """
    parts = []
    if system:
        messages = [{"role": "system", "content": system}, *messages]
    if tools:
        parts.append("<|im_start|>system\n# Tools\n" + json.dumps(tools, sort_keys=True) + "<|im_end|>\n")
    for m in messages:
        text = message_text(m.get("content"))
        if m.get("tool_calls"):
            text += json.dumps(m["tool_calls"], sort_keys=True)
        parts.append(f"<|im_start|>{m.get('role', 'user')}\n{text}<|im_end|>\n")
    parts.append("<|im_start|>assistant\n")
    return "".join(parts)
