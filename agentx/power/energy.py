"""Energy over the profiling window from the sampled readings (SPEC §3, "Power").

Per GPU, from its energy counter where every read in the window has one (the increase between
the reads that bound the window, a decrease counting as a reset from zero, as Prometheus'
`increase()` does), else by integrating its power over the reads (trapezoids). Summed over the
GPUs. The window is [the "open" read, the "close" read] when both succeeded (`window: exact`; a
drained run's drain reads inside it count as its profile reads do: the peak is over the same span),
else the first and last periodic reads in the profiling phase (`window: periodic`, a killed run).

The result is valid (`valid`, which the result calls `power_valid`) unless: fewer than two reads
bound the window, a bounding read failed, a GPU seen in the window is missing from a bounding
read, a GPU has neither power nor energy, more than 10 % of the window's reads failed, or a
GPU's energy counter stood still between more than 10 % of its consecutive reads (a working GPU
draws tens of watts idle: the source updates less often than it is read, as dcgm-exporter does
by default, every 30 s, unless started with `-c 1000`).
"""

from __future__ import annotations

from agentx.power.readings import gpu_order
from agentx.power.sampler import WINDOW_PHASES, PowerSample

MAX_FAILED_SHARE = 0.10
MAX_STILL_SHARE = 0.10  # of a counter's consecutive reads that may repeat a value


def increase(values: list[float]) -> tuple[float, int]:
    """A counter's increase over its reads, and how many resets (decreases) it went through."""
    total, resets = 0.0, 0
    for a, b in zip(values, values[1:]):
        if b >= a:
            total += b - a
        else:  # restarted from zero: what it counted since then is b (the rest before it is lost)
            total += b
            resets += 1
    return total, resets


def integrate(points: list[tuple[float, float]]) -> float:
    """∫ power dt by trapezoids over (t, W) points sorted by t."""
    return sum((t1 - t0) * (p0 + p1) / 2 for (t0, p0), (t1, p1) in zip(points, points[1:]))


def _window(samples: list[PowerSample]) -> tuple[list[PowerSample], str, list[str]]:
    opened = next((s for s in samples if s.phase == "open"), None)
    closed = next((s for s in samples if s.phase == "close"), None)
    if opened and closed:
        rows = [s for s in samples if opened.t <= s.t <= closed.t and s.phase in WINDOW_PHASES]
        rows = [opened] + [s for s in rows if s is not opened and s is not closed] + [closed]
        failed = [f"the {s.phase} read failed ({s.error})" for s in (opened, closed) if s.error]
        return rows, "exact", failed
    return [s for s in samples if s.phase == "profile"], "periodic", []


def _gpu(gpu: str, points: list, good: list[PowerSample], t0: float, t1: float) -> tuple[dict, list[str]]:
    """One GPU's figures from its `points`, (t, reading) of the good reads that have it, in order."""
    reasons = [f"GPU {gpu} is missing from the window's {name} read" for name, t in (("first", t0), ("last", t1))
               if not any(pt == t for pt, _ in points)]
    energies = [r.energy_j for _, r in points]
    powers = [(t, r.power_w) for t, r in points if r.power_w is not None]
    out = {"gpu": gpu, "reads": len(points), "missing_reads": len(good) - len(points)}
    if all(e is not None for e in energies) and len(points) >= 2 and not reasons:
        out["energy_j"], out["counter_resets"] = increase(energies)
        out["method"] = "counter"
        still = sum(1 for a, b in zip(energies, energies[1:]) if a == b)
        if still > MAX_STILL_SHARE * (len(energies) - 1):
            reasons.append(f"GPU {gpu}'s energy counter did not change between {still} of {len(energies) - 1} "
                           "reads: the source updates less often than once a second (dcgm-exporter: -c 1000)")
    elif len(powers) >= 2:
        out["energy_j"], out["method"] = integrate(powers), "integrated"
    else:
        out["energy_j"], out["method"] = 0.0, "none"
        reasons.append(f"GPU {gpu} reported neither an energy counter nor power in two reads")
    out["avg_w"] = out["energy_j"] / (t1 - t0) if t1 > t0 else None
    out["peak_w"] = max((p for _, p in powers), default=None)
    return out, reasons


def window_energy(samples: list[PowerSample], source: str | None) -> dict:
    """The power section of a result point (before the per-token figures)."""
    if source is None:
        return {"valid": False, "source": None, "reasons": ["no power source (bench --power)"]}
    rows, window, reasons = _window(samples)
    good = [s for s in rows if s.error is None and s.gpus]
    out: dict = {"valid": False, "source": source, "window": window, "reads": len(rows)}
    failed = len(rows) - len(good)
    if rows and failed > MAX_FAILED_SHARE * len(rows):
        first = next((s.error for s in rows if s.error), None)
        reasons.append(f"{failed} of {len(rows)} reads in the window failed" + (f" ({first})" if first else ""))
    if len(good) < 2:
        out.update(failed_reads=failed, reasons=reasons + ["fewer than two readings in the profiling window"])
        return out
    t0, t1 = good[0].t, good[-1].t
    out["failed_reads"] = failed
    gpus = sorted({r.gpu for s in good for r in s.gpus}, key=gpu_order)
    points: dict[str, list] = {gpu: [] for gpu in gpus}  # per GPU, in one pass over the reads
    for s in good:
        t = s.t
        for r in s.gpus:
            points[r.gpu].append((t, r))
    per_gpu = []
    for gpu in gpus:
        row, why = _gpu(gpu, points[gpu], good, t0, t1)
        per_gpu.append(row)
        reasons += why
    totals = [sum(r.power_w for r in s.gpus) for s in good
              if len(s.gpus) == len(gpus) and all(r.power_w is not None for r in s.gpus)]
    energy = sum(g["energy_j"] for g in per_gpu)
    methods = {g["method"] for g in per_gpu}
    out.update({
        "window_s": t1 - t0, "t_start": t0, "t_end": t1, "gpus": len(gpus),
        "method": methods.pop() if len(methods) == 1 else "mixed",
        "energy_j": energy, "avg_w": energy / (t1 - t0) if t1 > t0 else None,
        "peak_w": max(totals, default=None), "per_gpu": per_gpu,
        "counter_resets": sum(g.get("counter_resets", 0) for g in per_gpu),
    })
    if not t1 > t0:
        reasons.append("the window's reads have no duration")
    out["valid"], out["reasons"] = not reasons, reasons
    return out


def power_over_time(samples: list[PowerSample]) -> list[tuple[float, float]]:
    """(t, W summed over the GPUs) of every read with power for all the GPUs it lists."""
    return [(s.t, sum(r.power_w for r in s.gpus)) for s in samples
            if s.error is None and s.gpus and all(r.power_w is not None for r in s.gpus)]
