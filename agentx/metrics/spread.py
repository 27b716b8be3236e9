"""Run-to-run spread of the headline percentiles (SPEC section 3, "Spread"; issue #24): a seeded
cluster bootstrap over session trees. A run's requests are not independent draws: those of one
tree share a prefix, a lane and each other's queueing, so resampling requests would understate
how much the percentiles move from one run to the next. Each resample draws the run's trees with
replacement (a tree with all its profiled requests, as a unit) and recomputes the percentile on
the requests so drawn; the 2.5th and 97.5th percentiles of the resampled values are the 95 %
interval.

Vectorized: the values are sorted once, a resample is a row of counts per tree, and a weighted
percentile is a search in the row's cumulative counts (linear interpolation, as np.percentile on
the expanded sample)."""

from __future__ import annotations

import numpy as np

from agentx.records import Record

RESAMPLES = 400
SEED = 0  # fixed: the same records give the same interval
LEVEL = 0.95
BLOCK = 2_000_000  # resample x request cells held at once (about 24 MB)
HEADLINE = (50, 90, 99)  # the percentiles the summary prints (p99: stored and printed, no rule)


def tree_counts(trees: int, resamples: int = RESAMPLES, seed: int = SEED) -> np.ndarray:
    """(resamples, trees) int32: how many times each tree is drawn in each resample (trees drawn
    with replacement, as many as there are)."""
    rng = np.random.default_rng(seed)
    return rng.multinomial(trees, np.full(trees, 1.0 / trees), size=resamples).astype(np.int32)


def resampled_percentiles(values: np.ndarray, tree: np.ndarray, counts: np.ndarray, qs) -> np.ndarray:
    """(len(qs), resamples): percentile q of `values` in each resample, where value i belongs to
    tree index `tree[i]` and resample b holds tree t `counts[b, t]` times. NaN where a resample
    drew no tree that has a value. Resamples go in blocks of about BLOCK cells (memory bound)."""
    order = np.argsort(values, kind="stable")
    v, g = values[order], tree[order]
    step = max(1, BLOCK // max(v.size, 1))
    return np.concatenate([_block(v, counts[i:i + step][:, g], qs) for i in range(0, counts.shape[0], step)], axis=1)


def _block(v: np.ndarray, weights: np.ndarray, qs) -> np.ndarray:
    """Percentiles of the sorted values `v` under each row of `weights` (counts per value)."""
    cum = np.cumsum(weights, axis=1, dtype=np.int64)  # expanded rank + 1 of each sorted value
    b, n = cum.shape
    total = cum[:, -1]
    stride = int(total.max()) + 1
    offset = np.arange(b, dtype=np.int64) * stride
    flat = (cum + offset[:, None]).ravel()  # rows laid end to end: one search for all of them
    last = np.maximum(total - 1, 0)
    out = np.full((len(qs), b), np.nan)
    for k, q in enumerate(qs):
        h = q / 100 * last
        lo = np.floor(h).astype(np.int64)
        hi = np.minimum(lo + 1, last)
        # the sorted value at expanded rank r: the first whose cumulative count exceeds r
        i_lo = np.minimum(np.searchsorted(flat, lo + offset, side="right") - np.arange(b) * n, n - 1)
        i_hi = np.minimum(np.searchsorted(flat, hi + offset, side="right") - np.arange(b) * n, n - 1)
        out[k] = np.where(total > 0, v[i_lo] + (h - lo) * (v[i_hi] - v[i_lo]), np.nan)
    return out


def interval(values, trees, counts: np.ndarray, index: dict, qs=HEADLINE) -> dict | None:
    """{pQ: {value, lo, hi, lo_rel, hi_rel, width_rel}} for the percentiles `qs` of `values` (one per
    request, its tree id in `trees`): the 95 % bootstrap interval, absolute and relative to the
    run's own percentile. None without values."""
    v = np.asarray(values, dtype=float)
    if v.size == 0:
        return None
    g = np.asarray([index[t] for t in trees], dtype=np.int64)
    point = np.percentile(v, qs)
    res = resampled_percentiles(v, g, counts, qs)
    out = {}
    for q, p, row in zip(qs, point, res):
        lo, hi = _ends(row[np.isfinite(row)])
        out[f"p{q:g}"] = _relative(float(p), lo, hi)
    return out


def _ends(resampled: np.ndarray) -> tuple[float, float]:
    tail = (1 - LEVEL) / 2 * 100
    lo, hi = np.percentile(resampled, (tail, 100 - tail))
    return float(lo), float(hi)


def _relative(value: float, lo: float, hi: float) -> dict:
    """An interval with its ends relative to the run's own figure (None where that is 0)."""
    rel = (lambda x: x / value - 1) if value > 0 else (lambda x: None)  # noqa: E731
    return {"value": value, "lo": lo, "hi": hi, "lo_rel": rel(lo), "hi_rel": rel(hi),
            "width_rel": (hi - lo) / value if value > 0 else None}

def _inverted(iv: dict | None) -> dict | None:
    """The intervals of 1 / x (interactivity from ITL, SPEC section 3): the ends swap and invert."""
    if iv is None:
        return None
    return {q: _relative(1 / d["value"], 1 / d["hi"], 1 / d["lo"]) for q, d in iv.items()
            if min(d["value"], d["lo"]) > 0}


def spread(ok: list[Record], resamples: int = RESAMPLES, seed: int = SEED) -> dict | None:
    """The 95 % interval of each headline percentile (TTFT, ITL, E2E latency, interactivity and
    E2E-normalized interactivity at p50 / p90 / p99) by a cluster bootstrap over the run's
    session trees (not throughput: at a fixed concurrency heavier trees would take longer, which
    a resample of them cannot know); None without a successful request."""
    if not ok:
        return None
    tree_ids = [r.tree for r in ok]
    index = {t: i for i, t in enumerate(sorted(set(tree_ids)))}
    counts = tree_counts(len(index), resamples, seed)
    with_ttft = [r for r in ok if r.ttft is not None]
    decoding = [r for r in ok if r.itl is not None]
    normed = [r for r in ok if r.output_tokens >= 1]
    itl = interval([r.itl for r in decoding], [r.tree for r in decoding], counts, index)
    per_token = interval([(r.end - r.start) / r.output_tokens for r in normed], [r.tree for r in normed], counts,
                         index)
    return {
        "method": "cluster bootstrap over session trees", "level": LEVEL, "resamples": resamples, "seed": seed,
        "trees": len(index), "requests": len(ok),
        "ttft_s": interval([r.ttft for r in with_ttft], [r.tree for r in with_ttft], counts, index),
        "itl_s": itl, "interactivity_tok_s": _inverted(itl),
        "e2el_s": interval([r.end - r.start for r in ok], tree_ids, counts, index),
        "e2e_normalized_interactivity_tok_s": _inverted(per_token),
    }
