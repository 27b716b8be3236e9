"""A Markdown table, as the benchmark scripts print one with `--markdown` (benchmarks/docs.py pastes
it into README.md and docs/)."""

from __future__ import annotations


def markdown(headers: list[str], rows: list[list[str]], left: int = 1) -> str:
    """The first `left` columns left-aligned, the rest right-aligned (figures)."""
    align = ["---" if i < left else "---:" for i in range(len(headers))]
    lines = [headers, align, *rows]
    return "\n".join("| " + " | ".join(str(c) for c in line) + " |" for line in lines)


def rich_markdown(table, left: set[str] = frozenset()) -> str:
    """A rich Table's header and cells as Markdown (columns named in `left` left-aligned)."""
    heads = [str(c.header) for c in table.columns]
    rows = [list(map(str, cells)) for cells in zip(*(c._cells for c in table.columns))]
    align = ["---" if h in left else "---:" for h in heads]
    lines = [heads, align, *rows]
    return "\n".join("| " + " | ".join(line) + " |" for line in lines)
