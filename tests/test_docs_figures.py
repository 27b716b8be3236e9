"""The docs' tables are what the code prints (issue #45): every quick deterministic table of README.md
and docs/ (virtual time or seeded, the same on any host) is re-run by its command and compared with
the document; a hand-edited figure fails. Every relative link in them resolves.

Slow and wall-clock tables are not re-run here: `python -m benchmarks.docs --check` lists them with
their age in commits."""

import re
from pathlib import Path

import pytest

from benchmarks import docs as gen

ROOT = Path(__file__).resolve().parents[1]
QUICK = [t.name for t in gen.TABLES if t.kind == "quick"]


def test_every_table_has_one_block_and_a_known_command():
    found = gen.all_blocks(gen.documents(ROOT))  # a block twice, or unregistered, raises
    assert set(found) == set(gen.BY_NAME), "a registered table with no block in README.md or docs/"
    for name, block in found.items():
        if not block.body and gen.BY_NAME[name].kind != "quick":
            continue  # a slow table not generated yet: `--check` lists it so
        assert re.search(r"\| commit \w+", block.header), f"{name}: its marker names no commit"
        if gen.BY_NAME[name].kind == "wall":
            assert "| host " in block.header, f"{name}: a wall-clock table's marker names its host"


@pytest.mark.parametrize("name", QUICK)
def test_the_document_holds_what_the_code_prints(name):
    diffs = gen.differences(gen.documents(ROOT), {name: gen.run(gen.BY_NAME[name])})
    assert not diffs, (f"the docs differ from what the code prints; regenerate with "
                       f"`python -m benchmarks.docs --only {name}`:\n\n" + "\n\n".join(diffs))


def test_a_hand_edited_figure_fails():
    """The check is not vacuous: change one digit of a table and it names that table."""
    name = "hybrid-plan"  # the cheapest quick table
    printed = {name: gen.run(gen.BY_NAME[name])}
    docs = gen.documents(ROOT)
    assert not gen.differences(docs, printed)
    block = gen.all_blocks(docs)[name]
    text = docs[block.path]
    row = block.body.rindex("\n| ") + 1  # the table's last row: a figure, not a heading
    digit = block.start + row + re.search(r"\d", block.body[row:]).start()
    edited = text[:digit] + str((int(text[digit]) + 1) % 10) + text[digit + 1:]
    diffs = gen.differences({**docs, block.path: edited}, printed)
    assert len(diffs) == 1 and name in diffs[0]


LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def anchors(path: Path) -> set[str]:
    """GitHub's heading anchors of a Markdown file."""
    heads = re.findall(r"^#+ (.+)$", path.read_text(), re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in heads}


def test_every_relative_link_resolves():
    broken = []
    for doc in gen.documents(ROOT):
        for target in LINK.findall(doc.read_text()):
            if re.match(r"[a-z]+:", target):
                continue  # http(s), mailto: not checked here (no network)
            file, _, anchor = target.partition("#")
            dest = (doc.parent / file).resolve() if file else doc
            if not dest.exists():
                broken.append(f"{doc.relative_to(ROOT)}: {target} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                broken.append(f"{doc.relative_to(ROOT)}: {target} (no such heading)")
    assert not broken, "\n".join(broken)
