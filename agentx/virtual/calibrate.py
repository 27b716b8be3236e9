"""`agentx sim calibrate`: every row of the calibration table run in virtual time, against what
was published.

A row runs as InferenceX measured it: `concurrency` closed-loop lanes, 2 warmup prompts per lane
(benchmark_serving's 2 x concurrency warmups), then 10 prompts per lane (its 10 x concurrency
prompts), lengths uniform in [R x L, L]; throughput per GPU is total tokens over first start to
last end, TTFT and TPOT (the ITL of a request: (E2E - TTFT) / (OSL - 1)) are medians.

Three shares (SPEC section 6.1), each row scored once per share it belongs to:

- in sample: the rows the constants are fitted on (every modeled row outside the held-out third),
  with the shipped constants (presets.toml [timing], fitted on exactly those rows);
- leave one group out: the same rows, each with constants refitted without every row of its
  hardware x engine (`engine/fit.py`): how a pairing with no published point of its own is predicted;
- held out: the held-out third (`calibration.HELD_OUT_RULE`, chosen by row id before any fitting),
  with the shipped constants, which never saw them.
"""

from __future__ import annotations

import math
import os
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

from agentx.engine.calibration import HELD_OUT_RULE, Row, load_table, row_engine
from agentx.engine.fit import held_out

WARMUP_PER_LANE = 2
PROMPTS_PER_LANE = 10
TOK_S_BAND, ITL_BAND, TTFT_BAND = 0.15, 0.20, 0.50
SHARES = ("in-sample", "group", "held-out")
SHARE_NAMES = {"in-sample": "in sample (shipped constants, fitted on these rows)",
               "group": "leave one hardware x engine group out (refitted without the row's group)",
               "held-out": "held out (shipped constants; never fitted on these rows)"}


@dataclass
class Outcome:
    id: str
    group: str
    model: str
    precision: str
    parallelism: str
    scenario: str
    concurrency: int
    profile: str  # the constants used, and what they were fitted on
    published_tok_s_per_gpu: float
    tok_s_per_gpu: float | None
    published_ttft_ms: float | None
    ttft_ms: float | None
    published_tpot_ms: float | None
    itl_ms: float | None
    wall_s: float
    share: str = "in-sample"
    moe: bool = False
    error: str = ""

    @property
    def ratio(self) -> float | None:
        return self.tok_s_per_gpu / self.published_tok_s_per_gpu if self.tok_s_per_gpu else None

    @property
    def itl_ratio(self) -> float | None:
        return self.itl_ms / self.published_tpot_ms if self.itl_ms and self.published_tpot_ms else None

    @property
    def ttft_ratio(self) -> float | None:
        return self.ttft_ms / self.published_ttft_ms if self.ttft_ms and self.published_ttft_ms else None


def run_row(row: Row, params, fitted_on: list[str], out: str, prompts_per_lane: int = PROMPTS_PER_LANE,
            share: str = "in-sample") -> Outcome:
    from agentx.replay.scenarios import Scenario, scenario_sessions
    from agentx.replay.settings import BenchSettings
    from agentx.engine.config import Deployment, parallelism_label
    from agentx.virtual.runner import sim_bench

    timing = {"mfu": params["mfu"], "mbu": params["mbu"], "overhead_s": params["overhead_ms"] / 1000,
              "moe_efficiency": params["moe_efficiency"], "kv_efficiency": params["kv_efficiency"],
              "roofline_norm": params["roofline_norm"]} if params else {}
    cfg = row_engine(row, **timing)
    profile = (f"left out: mfu {params['mfu']:g}, mbu {params['mbu']:g}, overhead {params['overhead_ms']:g} ms, "
               f"MoE efficiency {params['moe_efficiency']:g}, KV efficiency {params['kv_efficiency']:g}, "
               f"roofline norm {params['roofline_norm']:g}, fitted on the {len(fitted_on)} {'fit rows of other hardware x engine pairs' if share == 'group' else 'other rows'}"
               if params else "shipped constants (fitted on the rows outside the held-out third)")
    sc = Scenario(row.isl, row.osl, row.range_ratio)
    base = dict(id=row.id, group=row.group, model=row.model, precision=row.precision,
                parallelism=parallelism_label(cfg), scenario=sc.name, concurrency=row.concurrency, profile=profile,
                published_tok_s_per_gpu=row.tok_s_per_gpu, published_ttft_ms=row.ttft_ms_p50,
                published_tpot_ms=row.tpot_ms_p50, share=share, moe=row.moe)
    t0 = time.perf_counter()
    sessions = scenario_sessions(sc, row.concurrency, WARMUP_PER_LANE + prompts_per_lane, seed=0)
    settings = BenchSettings.build(out=out, url="virtual", concurrency=row.concurrency, duration=1e7, seed=0,
                                   warmup_requests_per_lane=WARMUP_PER_LANE, scenario=sc.name, dataset=sc.name,
                                   reuse_sessions=False)
    result = sim_bench(settings, sessions, Deployment(cfg), command=f"agentx sim calibrate ({row.id})")
    rm = result["request_metrics"]
    tp, ttft, itl = rm.get("throughput") or {}, rm.get("ttft_s") or {}, rm.get("itl_s") or {}
    return Outcome(**base, tok_s_per_gpu=tp.get("total_tok_s_per_gpu"),
                   ttft_ms=ttft["p50"] * 1000 if ttft.get("p50") is not None else None,
                   itl_ms=itl["p50"] * 1000 if itl.get("p50") is not None else None,
                   wall_s=time.perf_counter() - t0)


def calibrate(out: Path, only: list[str] | None = None, shares: tuple[str, ...] = SHARES, workers: int = 1,
              prompts_per_lane: int = PROMPTS_PER_LANE) -> tuple[list[Outcome], list[Row]]:
    """Run the (selected) modeled rows in each share they belong to; return the outcomes and the rows
    not modeled."""
    table = load_table()
    modeled = [r for r in table.row if r.modeled]
    fitted = [r for r in modeled if not r.held_out]
    pick = lambda rows: [r for r in rows if not only or any(key in r.id for key in only)]  # noqa: E731
    jobs = []
    for share in shares:
        chosen = pick([r for r in modeled if r.held_out] if share == "held-out" else fitted)
        held = held_out(fitted, True, chosen) if share == "group" else {}
        jobs += [(r, held.get(r.id, (None, []))[0], held.get(r.id, (None, []))[1], str(Path(out) / share / r.id),
                  prompts_per_lane, share) for r in chosen]
    if workers > 1:
        with ProcessPoolExecutor(max_workers=min(workers, os.cpu_count() or 1)) as pool:
            outcomes = list(pool.map(run_row, *zip(*jobs))) if jobs else []
    else:
        outcomes = [run_row(*job) for job in jobs]
    return outcomes, [r for r in table.row if not r.modeled and (not only or any(k in r.id for k in only))]


def within(ratio: float | None, band: float) -> bool:
    return ratio is not None and abs(ratio - 1) <= band


def geomean(values: list[float]) -> float | None:
    values = [v for v in values if v]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def block(items: list[Outcome]) -> dict:
    """Shares within the bands and geometric-mean ratios of some outcomes (TTFT over the rows whose
    source publishes it)."""
    n, timed = len(items), [o for o in items if o.published_ttft_ms]
    share = lambda hits, of: sum(hits) / of if of else None  # noqa: E731
    return {"rows": n,
            "within_tok_s": share((within(o.ratio, TOK_S_BAND) for o in items), n),
            "within_itl": share((within(o.itl_ratio, ITL_BAND) for o in items), n),
            "within_both": share((within(o.ratio, TOK_S_BAND) and within(o.itl_ratio, ITL_BAND) for o in items), n),
            "ttft_rows": len(timed), "within_ttft": share((within(o.ttft_ratio, TTFT_BAND) for o in timed), len(timed)),
            "geomean_tok_s_ratio": geomean([o.ratio for o in items]),
            "geomean_itl_ratio": geomean([o.itl_ratio for o in items]),
            "geomean_ttft_ratio": geomean([o.ttft_ratio for o in timed])}


def summary(outcomes: list[Outcome]) -> dict:
    """Per share: all rows, MoE and dense rows apart, and per hardware x engine."""
    out = {}
    for share in SHARES:
        items = [o for o in outcomes if o.share == share]
        if items:
            groups = sorted({o.group for o in items})
            out[share] = {"total": block(items), "moe": block([o for o in items if o.moe]),
                          "dense": block([o for o in items if not o.moe]),
                          "groups": {g: block([o for o in items if o.group == g]) for g in groups}}
    return out


def as_json(outcomes: list[Outcome], skipped: list[Row]) -> dict:
    table = load_table()
    return {"bands": {"tok_s_per_gpu": TOK_S_BAND, "itl_p50": ITL_BAND, "ttft_p50": TTFT_BAND},
            "held_out_rule": HELD_OUT_RULE,
            "shares": {s: SHARE_NAMES[s] for s in SHARES if any(o.share == s for o in outcomes)},
            "summary": summary(outcomes),
            "rows": [{**asdict(o), "ratio": o.ratio, "itl_ratio": o.itl_ratio, "ttft_ratio": o.ttft_ratio,
                      "source": asdict_source(table, o.id)} for o in outcomes],
            "not_modeled": [{"id": r.id, "why": r.why_not} for r in skipped]}


def asdict_source(table, row_id: str) -> dict:
    row = next(r for r in table.row if r.id == row_id)
    src = table.sources[row.source]
    return {"repo": src.repo, "path": src.path, "commit": src.commit}
