"""Whether a point's figures are firm enough to be an answer (SPEC section 3, "Settled:
confidence"; issue #43): a frontier point, a `sim plan` answer or a "y at x" answer whose TTFT
p50 or p90 has a 95 % interval (over session trees, `spread.py`) wider than a bound is
low-confidence: kept off the answer and shown apart, with the session trees it would need.

Unlike the opt-in `spread` rule (`--agreement`), this does not make the run NOT VALID: its
figures are what it measured, but another sample of sessions could move them too far for them
to answer a question."""

from __future__ import annotations

import math

ANSWER_SPREAD_LIMIT = 0.5  # widest 95 % interval of TTFT p50 / p90, as a share of the figure (about +-25 %)
FIGURES = (("p50", "TTFT p50"), ("p90", "TTFT p90"))
MIN_TREES = 10  # fewer session trees: the interval cannot be bounded (as the spread rule's)


def interval_widths(spread: dict | None) -> dict | None:
    """What `confidence` reads of a result's `spread` (section `spread` of result.json): the trees
    and the relative widths of TTFT p50 and p90."""
    if not spread:
        return None
    ttft = spread.get("ttft_s") or {}
    return {"trees": spread.get("trees"),
            "ttft_s": {q: {"width_rel": (ttft.get(q) or {}).get("width_rel")} for q, _ in FIGURES}}


def confidence(ci: dict | None, limit: float = ANSWER_SPREAD_LIMIT) -> dict:
    """{low, width, figure, trees, limit, need_trees, text} of a result's `spread`. `limit` 0: no
    bound (never low). A result with no interval (an aggregate imported without its records) is
    not judged: `width` None, `low` False."""
    ttft = (ci or {}).get("ttft_s") or {}
    widths = [((ttft.get(q) or {}).get("width_rel"), label) for q, label in FIGURES]
    widths = [(w, label) for w, label in widths if w is not None]
    trees = (ci or {}).get("trees")
    out = {"low": False, "width": None, "figure": None, "trees": trees, "limit": limit or None, "need_trees": None,
           "text": None}
    if not widths:
        return out
    width, label = max(widths, key=lambda w: w[0])  # the first of equal ones
    out.update(width=width, figure=label)
    if not limit:
        return out
    trees = trees or 1
    ratio = min(width / limit, 1e6)  # (bounded: a limit near 0 would overflow the square)
    need = max(trees, math.ceil(trees * ratio ** 2))  # the width falls as 1 / sqrt(trees)
    if trees < MIN_TREES:
        need = max(need, MIN_TREES)
        out.update(low=True, need_trees=need, text=f"only {trees} session tree{'s' if trees != 1 else ''}: too few "
                   f"to bound the spread (at least {MIN_TREES}; about {need:,} would do)")
    elif width > limit:
        out.update(low=True, need_trees=need,
                   text=f"{label}'s 95 % interval is {width:.0%} wide (limit {limit:.0%}; {trees} session trees): "
                        f"about {need:,} session trees would narrow it to the limit")
    return out
