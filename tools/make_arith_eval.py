"""Write agentx/data/evals/arith.jsonl: 100 arithmetic word problems in the style of GSM8K (two
to three steps of whole-number arithmetic), drawn from templates with a fixed seed, each with its
exact answer. agentx's own data (Apache-2.0, as the package): nothing is downloaded.

    python tools/make_arith_eval.py      # rewrites the file; the same bytes every time
"""

from __future__ import annotations

import json
import random
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "agentx" / "data" / "evals" / "arith.jsonl"
SEED, COUNT = 43, 100
NAMES = ("Maya", "Tom", "Lena", "Ravi", "Sofia", "Omar", "Grace", "Kenji", "Amara", "Lucas", "Ines", "Noah")
ITEMS = ("apples", "marbles", "stickers", "pencils", "cookies", "stamps", "shells", "cards")


def apples(r: random.Random) -> tuple[str, int]:
    n, item = r.choice(NAMES), r.choice(ITEMS)
    a, b, c = r.randint(5, 60), r.randint(2, 9), r.randint(3, 12)
    d = r.randint(1, a + b * c - 1)
    return (f"{n} has {a} {item}. {n} buys {b} bags with {c} {item} in each bag, then gives {d} {item} to a "
            f"friend. How many {item} does {n} have now?", a + b * c - d)


def travel(r: random.Random) -> tuple[str, int]:
    a, b, c, d = r.randint(30, 120), r.randint(2, 6), r.randint(20, 90), r.randint(1, 5)
    return (f"A train travels at {a} kilometres per hour for {b} hours, then at {c} kilometres per hour for {d} "
            f"hours. How many kilometres does it travel in all?", a * b + c * d)


def change(r: random.Random) -> tuple[str, int]:
    n, item = r.choice(NAMES), r.choice(ITEMS)
    a, b = r.randint(2, 15), r.randint(2, 9)
    c = r.choice([x for x in (20, 50, 100, 200) if x > a * b])
    return (f"A shop sells {item} at {a} dollars each. {n} buys {b} of them and pays with a {c}-dollar bill. "
            f"How many dollars of change does {n} get?", c - a * b)


def packs(r: random.Random) -> tuple[str, int]:
    a, b, c = r.randint(12, 40), r.randint(2, 6), r.choice((5, 6, 8, 10, 12))
    return (f"A class has {a} students. Each student needs {b} notebooks, and notebooks are sold in packs of {c}. "
            f"What is the smallest number of packs the teacher must buy?", -(-(a * b) // c))


def savings(r: random.Random) -> tuple[str, int]:
    n = r.choice(NAMES)
    a, b = r.randint(5, 40), r.randint(4, 20)
    c = r.randint(10, a * b - 1)
    return (f"{n} saves {a} dollars every week. After {b} weeks, {n} spends {c} dollars on a bike. How many "
            f"dollars does {n} have left?", a * b - c)


def boxes(r: random.Random) -> tuple[str, int]:
    a, b, c, d = r.randint(3, 12), r.randint(5, 20), r.randint(2, 9), r.choice((6, 10, 12, 20, 25))
    return (f"A farmer has {a} rows of tomato plants with {b} plants in each row. Each plant gives {c} tomatoes. "
            f"The farmer packs the tomatoes in boxes of {d}. How many boxes can be filled completely?",
            a * b * c // d)


TEMPLATES = (apples, travel, change, packs, savings, boxes)


def problems() -> list[dict]:
    r = random.Random(SEED)
    out = []
    for i in range(COUNT):
        question, answer = TEMPLATES[i % len(TEMPLATES)](r)
        out.append({"id": f"arith-{i:03d}", "question": question, "answer": answer})
    return out


def main() -> None:
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text("".join(json.dumps(p) + "\n" for p in problems()))
    print(f"{OUT}: {COUNT} problems")


if __name__ == "__main__":
    main()
