"""Validity of a run (SPEC section 3): the rules a result must pass to be printed as valid, each
checked with its figure and bound, and the `low sample` mark. A rule that fails gives a reason
(one line, printed and stored); a rule that cannot be checked (no figure) is listed as such.

The rules cover the answer, not only the requests: failed or overflowed requests, a run that did
not finish, cache probes that disagree, a client that could not keep the schedule, a simulated
target that wrote its tokens late or whose modeled figures the client did not measure (host
error) or whose figures are off the same plan replayed in virtual time (its twin: the host moved
the sim's modeled schedule), a window whose end cancelled more than a few requests, and a
run whose TTFT percentiles another run could put more than 5 % away (their bootstrap interval,
`spread`)."""

from __future__ import annotations

from collections import Counter

import numpy as np

from agentx.common import percentiles
from agentx.records import Record

FAILED_LIMIT = 0.10  # share of profiled requests that failed
OVERFLOW_LIMIT = 0.01  # share that overflowed the context
ACCURACY_DROP = 0.05  # `bench --eval`: the accuracy's 95 % upper bound at most this far below the reference
CANCELLED_LIMIT = 0.05  # share of profiled requests cancelled at the window's end (every mode; `--drain` avoids it)
HOST_ERROR_LIMIT = 0.03  # measured minus modeled (p50), as a share of the metric's p50
# the run's TTFT p50 / p90 and ITL p50 against its virtual twin's over the same requests (agentx-sim
# targets): two valid runs of one plan are then within 2 x TWIN_LIMIT = 5 % of each other on the
# requests they share, issue #24's agreement
TWIN_LIMIT = 0.025
# requests only one of the run's and its twin's windows held, as a share of both: the window's edge
# (a request that starts within the host's drift of the window's end) swaps one or two of ~100; more
# and the run's set is another sample than its twin's, which the rules over the same requests miss
TWIN_WINDOW_LIMIT = 0.05
TWIN_FIGURES = (("ttft_p50_s", "ttft_s", "p50", "TTFT p50"), ("ttft_p90_s", "ttft_s", "p90", "TTFT p90"),
                ("itl_p50_s", "itl_s", "p50", "ITL p50"))  # (twin key, request metric, percentile, label)
AGREEMENT = 0.05  # what `--agreement 0.05` asks: two runs agree on TTFT p50 and p90 within 5 % (off by default)
SPREAD_LIMIT = AGREEMENT * 2 ** 0.5  # widest 95 % interval (as a share of the figure) that promises it
SPREAD_PERCENTILES = ("p50", "p90")  # of TTFT
MIN_TREES = 10  # fewer session trees: a bootstrap over them cannot bound the spread
LOW_SAMPLE = 30  # fewer successful profiled requests than this: percentiles are rough


def _p50(values: list[float]) -> float | None:
    p = percentiles(np.asarray(values, dtype=float), (50,))
    return None if p is None else float(p[0])


def _itl(e2el: float, ttft: float, osl: int) -> float:
    return (e2el - ttft) / (osl - 1)


def host_error(ok: list[Record]) -> dict | None:
    """Per request, what the client measured minus what agentx-sim modeled (modeled seconds), as
    p50 / p90 / max for TTFT and ITL; and the sim's own share of it (its lag). None when the
    target published no modeled timings (not agentx-sim)."""
    sim = [r for r in ok if r.modeled_ttft is not None and r.ttft is not None]
    if not sim:
        return None
    ttft = [r.ttft - r.modeled_ttft for r in sim]
    decoding = [r for r in sim if r.modeled_e2el is not None and r.output_tokens >= 2]
    measured_itl = [r.itl for r in decoding]
    modeled_itl = [_itl(r.modeled_e2el, r.modeled_ttft, r.output_tokens) for r in decoding]
    itl = [m - modeled for m, modeled in zip(measured_itl, modeled_itl)]
    lag_ttft = [r.sim_first_lag for r in sim if r.sim_first_lag is not None]
    lag_itl = [(r.sim_last_lag - r.sim_first_lag) / (r.output_tokens - 1) for r in decoding
               if r.sim_first_lag is not None and r.sim_last_lag is not None]

    def dist(values: list[float]) -> dict | None:
        p = percentiles(np.asarray(values, dtype=float), (50, 90))
        return None if p is None else {"p50": float(p[0]), "p90": float(p[1]), "max": max(values), "n": len(values)}

    return {"ttft_s": dist(ttft), "itl_s": dist(itl), "sim_lag_ttft_s": dist(lag_ttft), "sim_lag_itl_s": dist(lag_itl),
            "modeled_ttft_p50_s": _p50([r.modeled_ttft for r in sim]), "modeled_itl_p50_s": _p50(modeled_itl),
            # what the printed percentiles move by: percentile of measured minus percentile of modeled
            "ttft_shift_s": _shift([r.ttft for r in sim], [r.modeled_ttft for r in sim]),
            "itl_shift_s": _shift(measured_itl, modeled_itl)}


def _shift(measured: list[float], modeled: list[float]) -> dict | None:
    """{p50, p90}: the measured percentile minus the modeled one (the same requests)."""
    a, b = (percentiles(np.asarray(v, dtype=float), (50, 90)) for v in (measured, modeled))
    return None if a is None else {"p50": a[0] - b[0], "p90": a[1] - b[1]}


def twin(run_twin: dict | None, rm: dict) -> dict | None:
    """The virtual twin's figures (run.json's `twin`, `agentx/virtual/twin.py`) and the run's
    `deviation` from each: measured / twin - 1 (None where either figure is missing). None when
    the run had no twin (not against agentx-sim, or a virtual run itself)."""
    if not run_twin:
        return None
    out = dict(run_twin)
    if run_twin.get("checked"):
        deviation = {}
        for key, metric, q, _ in TWIN_FIGURES:
            measured, modeled = (rm.get(metric) or {}).get(q), run_twin.get(key)
            deviation[key] = measured / modeled - 1 if measured is not None and modeled else None
        out["deviation"] = deviation
    return out


def paired_text(paired: dict) -> str:
    """The run's TTFT request by request against its twin's (`twin.paired_ttft_s`)."""
    text = (f"request by request TTFT {paired['p50'] * 1000:+,.1f} ms (median), 90 % within "
            f"{paired['p90_abs'] * 1000:,.1f} ms ({paired['n']} pairs")
    if paired.get("ttft_p50_rel") is not None and paired.get("ttft_p90_rel") is not None:
        itl = paired.get("itl_p50_rel")
        text += (f"; over them TTFT p50 {paired['ttft_p50_rel']:+.1%}, p90 {paired['ttft_p90_rel']:+.1%}"
                 + (f", ITL p50 {itl:+.1%}" if itl is not None else "") + "; "
                 f"unpaired: {paired.get('unpaired_run', 0)} of the run, {paired.get('unpaired_twin', 0)} of the twin")
    return text + ")"


def _twin_rules(rules: list, tw: dict | None) -> None:
    """`twin_ttft` (TTFT p50 and p90) and `twin_itl` (ITL p50): the run's figure within TWIN_LIMIT
    of its twin's, over the requests both windows hold (`paired_ttft_s`; over the whole windows
    for a twin stored without them); `twin_window`: the requests only one window held, at most
    TWIN_WINDOW_LIMIT of them all. Listed as not checked, with the reason, where the twin could
    not be built."""
    if not tw:
        return
    paired = tw.get("paired_ttft_s") or {}
    same = paired.get("ttft_p50_rel") is not None
    figures = ({"ttft_p50_s": paired.get("ttft_p50_rel"), "ttft_p90_s": paired.get("ttft_p90_rel"),
                "itl_p50_s": paired.get("itl_p50_rel")} if same else tw.get("deviation") or {})
    for name, keys in (("twin_ttft", ("ttft_p50_s", "ttft_p90_s")), ("twin_itl", ("itl_p50_s",))):
        devs = [(abs(figures[k]), k) for k in keys if figures.get(k) is not None]
        if not devs:
            why = tw.get("reason") or "the run or its twin has no such figure"
            rules.append({"rule": name, "figure": None, "bound": TWIN_LIMIT, "ok": True, "reason": f"not checked: {why}"})
            continue
        share, key = max(devs, key=lambda d: d[0])  # the first of equal ones
        label = next(f[3] for f in TWIN_FIGURES if f[0] == key)
        limit = f"limit {TWIN_LIMIT:.1%}"
        if same:
            what = (f"{label} over the {paired['n']} requests both windows hold is {figures[key]:+.1%} off the same "
                    f"requests in virtual time ({limit})")
        else:
            what = (f"{label} {tw[key] * (1 + figures[key]) * 1000:,.1f} ms is {figures[key]:+.1%} off the same plan "
                    f"in virtual time ({tw[key] * 1000:,.1f} ms; {limit})")
        _rule(rules, name, share, TWIN_LIMIT, share > TWIN_LIMIT,
              f"virtual twin: {what}: the host moved the sim's modeled schedule, so another run could differ by "
              f"more than {2 * TWIN_LIMIT:.0%}")  # (request by request: the summary's twin line, printed once)
    if paired:
        alone = paired.get("unpaired_run", 0) + paired.get("unpaired_twin", 0)
        union = paired["n"] + alone
        _rule(rules, "twin_window", alone / union, TWIN_WINDOW_LIMIT, alone > TWIN_WINDOW_LIMIT * union,
              f"virtual twin: {paired.get('unpaired_run', 0)} of the run's and {paired.get('unpaired_twin', 0)} of the "
              f"twin's requests are in one window only ({alone / union:.1%} of {union}; limit "
              f"{TWIN_WINDOW_LIMIT:.0%}): the host moved which requests started inside the window")


def _rule(rules: list, name: str, figure, bound, failed: bool, text: str) -> None:
    rules.append({"rule": name, "figure": figure, "bound": bound, "ok": not failed, "reason": text if failed else None})


def _relative_rules(rules: list, err: dict | None, metric: dict, name: str, what: str) -> None:
    """`name` for TTFT and ITL: |p50 of `err`| within HOST_ERROR_LIMIT of the metric's p50, and
    (where given) the shift of its printed p50 and p90 within HOST_ERROR_LIMIT of each."""
    for key, label in (("ttft_s", "TTFT"), ("itl_s", "ITL")):
        d, dist = (err or {}).get(key), metric.get(key) or {}
        if not d or not dist.get("p50"):
            continue
        checks = [(abs(d["p50"]) / dist["p50"], f"{what} {label} p50 {d['p50'] * 1000:+,.1f} ms is "
                   f"{abs(d['p50']) / dist['p50']:.1%} of {label} p50 {dist['p50'] * 1000:,.1f} ms")]
        shift = (err or {}).get(key[:-2] + "_shift_s")
        for q in ("p50", "p90") if shift else ():
            if dist.get(q):
                share = abs(shift[q]) / dist[q]
                checks.append((share, f"{what} it moves {label} {q} by {shift[q] * 1000:+,.1f} ms, {share:.1%} of "
                                      f"{dist[q] * 1000:,.1f} ms"))
        share, text = max(checks, key=lambda c: c[0])  # the first of equal ones
        _rule(rules, f"{name}_{label.lower()}", share, HOST_ERROR_LIMIT, share > HOST_ERROR_LIMIT,
              f"{text} (limit {HOST_ERROR_LIMIT:.0%})")


def host_rules(host: dict | None, metric: dict) -> list[dict]:
    """The sim-lag and host-error rules (`sim_lag_ttft`, `sim_lag_itl`, `host_error_ttft`,
    `host_error_itl`): `host` (`host_error()`) as a share of `metric`'s TTFT and ITL percentiles
    (`request_metrics`' `ttft_s` / `itl_s`, or another run's: `--speed auto` reads a probe's host
    error against the figures of the run it is for)."""
    rules: list[dict] = []
    if host:
        _relative_rules(rules, {"ttft_s": host["sim_lag_ttft_s"], "itl_s": host["sim_lag_itl_s"]}, metric, "sim_lag",
                        "the simulated engine's own lag:")
        _relative_rules(rules, host, metric, "host_error", "host error (measured minus modeled):")
    return rules


def _spread_rule(rules: list, ci: dict | None, agreement: float) -> None:
    """`spread`: the widest 95 % interval of TTFT p50 and p90 (SPEC section 3, "Spread") within
    agreement x sqrt(2) of the figure, over at least MIN_TREES session trees. `agreement` 0: the
    figure is stored with no bound (the run asks for no agreement)."""
    if not ci:
        return
    limit = agreement * 2 ** 0.5 if agreement > 0 else None
    widths = [(d["width_rel"], q, d) for q, d in ((q, (ci.get("ttft_s") or {}).get(q)) for q in SPREAD_PERCENTILES)
              if d and d["width_rel"] is not None]
    if limit is not None and ci["trees"] < MIN_TREES:
        _rule(rules, "spread", max(widths)[0] if widths else None, limit, True,
              f"only {ci['trees']} session tree{'s' if ci['trees'] != 1 else ''} in the window: too few to bound "
              f"the spread of its percentiles over session trees (at least {MIN_TREES}; a longer run or more lanes)")
        return
    if not widths:
        return
    width, q, d = max(widths, key=lambda w: w[0])
    if limit is None:
        _rule(rules, "spread", width, None, False, "")
        return
    need = ci["trees"] * (width / limit) ** 2  # the width falls as 1 / sqrt(trees)
    _rule(rules, "spread", width, limit, width > limit,
          f"spread: TTFT {q}'s 95 % interval is {d['lo_rel']:+.0%} / {d['hi_rel']:+.0%} ({width:.0%} wide, limit "
          f"{limit:.1%}; {ci['trees']} session trees): another run could differ by more than {agreement:.0%} "
          f"(about {need:,.0f} trees, {need / ci['trees']:,.0f}x this run's, would narrow it to the limit)")


def _accuracy_rule(rules: list, acc: dict | None) -> None:
    """`accuracy` (`bench --eval`): NOT VALID when the upper end of the accuracy's 95 % interval is
    more than ACCURACY_DROP below the model's reference; listed as not checked without a reference."""
    if not acc:
        return
    measured = (f"{acc['eval']} {acc['correct']}/{acc['n']} ({acc['accuracy']:.0%}, 95 % interval up to "
                f"{acc['interval'][1]:.0%})")
    if acc.get("reference") is None:
        rules.append({"rule": "accuracy", "figure": None, "bound": None, "ok": True,
                      "reason": f"not checked: no reference accuracy (--eval-reference); {measured}"})
        return
    bound = acc["reference"] - ACCURACY_DROP
    _rule(rules, "accuracy", acc["interval"][1], bound, acc["interval"][1] < bound,
          f"accuracy {measured} is more than {ACCURACY_DROP:.0%} below the reference {acc['reference']:.0%}: the "
          f"deployment does not compute what the model does")


def validity(prof: list[Record], ok: list[Record], run: dict, health: dict, rm: dict, errors: Counter,
             cancelled: int, host: dict | None, ci: dict | None, tw: dict | None = None) -> dict:
    """Every rule with its figure and bound; `valid` when all pass; `reasons` of those that fail.
    A rule listed with no figure was not checked (its `reason` says why; it does not fail)."""
    rules: list[dict] = []
    n = len(prof)
    failed = sum(errors.values())
    if n:
        _rule(rules, "failed", failed / n, FAILED_LIMIT, failed > FAILED_LIMIT * n,
              f"{failed / n:.0%} of requests failed (limit {FAILED_LIMIT:.0%})")
        overflow = errors.get("context_overflow", 0)
        _rule(rules, "context_overflow", overflow / n, OVERFLOW_LIMIT, overflow > OVERFLOW_LIMIT * n,
              f"{overflow / n:.1%} overflowed the context (limit {OVERFLOW_LIMIT:.0%})")
    _rule(rules, "finished", bool(run.get("finished")), True, not run.get("finished"),
          "the run did not finish (killed or cancelled): partial records")
    _rule(rules, "succeeded", len(ok), 1, not ok, "no successful request in the profiling window")
    probes = run.get("cache_probe") or {}
    if probes:
        mismatches = sum(p.get("mismatches", 0) for p in probes.values())
        _rule(rules, "cache_probe", mismatches, 0, mismatches > 0,
              f"the cache probe found {mismatches} answers that differ warm from cold")
    _accuracy_rule(rules, run.get("accuracy"))
    if n:
        _rule(rules, "cancelled", cancelled / n, CANCELLED_LIMIT, cancelled > CANCELLED_LIMIT * n,
              f"{cancelled} of {n} profiled requests ({cancelled / n:.0%}) were cancelled at the window's end "
              f"(limit {CANCELLED_LIMIT:.0%}): the figures leave out the slowest requests (--drain: keep the load "
              f"on until every profiled request has ended)")
    late = (health.get("dispatch_lateness_ms") or {}).get("p99")
    if late is not None or health.get("verdict") not in (None, "ok"):
        verdict = health.get("verdict")
        _rule(rules, "client", late, health.get("late_bound_ms"), verdict not in (None, "ok"),
              f"the client could not keep the schedule ({verdict}: dispatch lateness p99 "
              f"{late if late is not None else float('nan'):,.1f} ms, limit {health.get('late_bound_ms')} ms wall; "
              f"client CPU {health.get('cpu_percent') or 0:.0f}%)")
    rules += host_rules(host, {"ttft_s": rm.get("ttft_s"), "itl_s": rm.get("itl_s")})
    _twin_rules(rules, tw)
    agreement = (run.get("settings") or {}).get("agreement")
    _spread_rule(rules, ci, agreement or 0.0)
    reasons = [r["reason"] for r in rules if not r["ok"]]
    return {"valid": not reasons, "reasons": reasons, "rules": rules,
            "low_sample": len(ok) < LOW_SAMPLE, "sample": len(ok), "low_sample_below": LOW_SAMPLE}
