"""The bundled accuracy evals (`bench --eval NAME[:N]`; SPEC section 3, "Accuracy"): their
problems, the prompt each is sent as, and how an answer is scored (exact match on the final
number). Shared by the client that runs an eval and the simulated engine, which in its `eval`
answers mode knows the bundled answers as it knows the rest of its modeled output.

`arith` (evals/arith.jsonl): 100 arithmetic word problems, agentx's own (tools/make_arith_eval.py,
Apache-2.0: evals/LICENSE)."""

from __future__ import annotations

import re
from functools import cache
from importlib.resources import files

import msgspec

from agentx.errors import AgentxError

EVALS = ("arith",)
# two worked examples before each problem (not in the set): the answer's form for any model
FEWSHOT = (
    "Question: Ana has 12 eggs. She uses 5 eggs and buys 2 boxes of 6 eggs. How many eggs does she have now?\n"
    "Answer: 12 - 5 = 7 eggs are left. 2 x 6 = 12 eggs are bought. 7 + 12 = 19. The answer is 19.\n\n"
    "Question: A bus carries 40 people on each trip. How many trips does it need for 130 people?\n"
    "Answer: 130 / 40 = 3.25, so 3 trips are not enough and 4 are. The answer is 4.\n\n")
_QUESTION = re.compile(r"Question: ([^\n]+)\nAnswer:\Z")
_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


class Problem(msgspec.Struct, frozen=True):
    id: str
    question: str
    answer: int


@cache
def problems(name: str) -> tuple[Problem, ...]:
    if name not in EVALS:
        raise AgentxError(f"unknown eval {name!r}; bundled: {', '.join(EVALS)}", "eval")
    text = (files("agentx.data") / "evals" / f"{name}.jsonl").read_bytes()
    return tuple(msgspec.json.decode(line, type=Problem) for line in text.splitlines() if line.strip())


def parse_spec(spec: str) -> tuple[str, int]:
    """`NAME` or `NAME:N` -> (name, N problems: the first N of the set; all of it by default)."""
    name, _, count = spec.strip().partition(":")
    total = len(problems(name))
    if not count:
        return name, total
    if not count.isdigit() or not 1 <= int(count) <= total:
        raise AgentxError(f"{spec!r}: want {name}:N with 1 <= N <= {total}", "eval")
    return name, int(count)


def prompt(problem: Problem) -> str:
    """The completion prompt of a problem: the worked examples, then it."""
    return f"{FEWSHOT}Question: {problem.question}\nAnswer:"


def final_number(text: str) -> float | None:
    """The last number of an answer (commas dropped, a trailing dot ignored), or None."""
    found = _NUMBER.findall(text)
    if not found:
        return None
    try:
        return float(found[-1].replace(",", ""))
    except ValueError:
        return None


def correct(problem: Problem, answer: str) -> bool:
    """Exact match on the final number."""
    return final_number(answer) == problem.answer


@cache
def _answers() -> dict[str, int]:
    return {p.question: p.answer for name in EVALS for p in problems(name)}


def known_answer(prompt_text: str) -> int | None:
    """The bundled answer of a prompt that ends with a bundled problem (as `prompt()` writes it)."""
    m = _QUESTION.search(prompt_text)
    return None if m is None else _answers().get(m.group(1))
