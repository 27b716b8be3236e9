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


@pytest.fixture(scope="module")
def printed() -> dict[str, str]:
    """What each quick table's command prints now (two at a time: they are single-threaded)."""
    return gen.generate(QUICK, jobs=2)


def test_every_table_has_one_block_and_a_known_command():
    found = gen.all_blocks(gen.documents(ROOT))  # a block twice, or unregistered, raises
    assert set(found) == set(gen.BY_NAME), "a registered table with no block in README.md or docs/"
    for name, block in found.items():
        assert re.search(r"\| commit \w+", block.header), f"{name}: its marker names no commit"
        if gen.BY_NAME[name].kind == "wall":
            assert "| host " in block.header, f"{name}: a wall-clock table's marker names its host"


def test_the_documents_hold_what_the_code_prints(printed):
    diffs = gen.differences(gen.documents(ROOT), printed)
    assert not diffs, ("the docs differ from what the code prints; regenerate with "
                       "`python -m benchmarks.docs --quick`:\n\n" + "\n\n".join(diffs))


def test_a_hand_edited_figure_fails(printed):
    """The check is not vacuous: change one digit of one table and it names that table."""
    docs = gen.documents(ROOT)
    block = gen.all_blocks(docs)[QUICK[0]]
    text = docs[block.path]
    digit = block.start + re.search(r"\d", block.body).start()
    edited = text[:digit] + str((int(text[digit]) + 1) % 10) + text[digit + 1:]
    diffs = gen.differences({**docs, block.path: edited}, printed)
    assert len(diffs) == 1 and QUICK[0] in diffs[0]


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
