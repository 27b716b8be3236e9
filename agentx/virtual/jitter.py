"""How far a host's jitter moves a plan off its virtual twin (SPEC section 10, "The demo"), in
virtual time: the twin (the plan hearing of each end CLIENT_REACTION_S x the speed late, as
bench's twin does), then draws whose plan hears of each end a random delay late (exponential,
mean the host's reaction x the speed) and whose TTFTs are measured a random host error late
(exponential, mean the host error x the speed: what an HTTP client adds to the figures it prints,
while the twin's are modeled), each compared with the twin over the requests both windows hold,
as the twin rules compare them (`twin.paired_ttft`).

Why: over HTTP a millisecond moves an arrival across an iteration's start and the sim batches
otherwise from there (the butterfly the twin rules bound); at some points and windows of a plan
this moves a printed percentile by more than the rules' 2.5 % on most runs of a quiet host, at
others by far less, and which are which changes with the engine profile. `agentx demo` picks its
point over HTTP with this; `benchmarks/demo_point.py` and `benchmarks/twin_sensitivity.py`
tabulate it."""

from __future__ import annotations

import random
import tempfile
from dataclasses import dataclass
from pathlib import Path

import msgspec

from agentx.engine.config import Deployment
from agentx.metrics.summary import distribution
from agentx.records import Record, read_records
from agentx.replay.settings import BenchSettings
from agentx.virtual.runner import VirtualRun
from agentx.virtual.twin import CLIENT_REACTION_S, paired_ttft

# A quiet host's wall milliseconds per request, at the median (`benchmarks/http_split.py`, SPEC
# section 10 "Host cost per request"): the reaction from an end to its successor's arrival, and
# what the client's measured TTFT carries beyond the sim's modeled one.
QUIET_REACTION_S = 0.0019
QUIET_HOST_ERROR_S = 0.0015


class LateEnds(VirtualRun):
    """A virtual run whose plan hears of each request's end a random delay late (mean `mean_s`)."""

    def __init__(self, *args, mean_s: float, seed: int, **kwargs):
        super().__init__(*args, **kwargs)
        self.rng, self.mean_s = random.Random(seed), mean_s

    def _ended(self, d, rec, at: float) -> None:
        super()._ended(d, rec, at + (self.rng.expovariate(1 / self.mean_s) if self.mean_s > 0 else 0.0))


def measured(records: list[Record], mean_s: float, seed: int) -> list[Record]:
    """The records as a client over HTTP would measure them: each TTFT a random host error late
    (exponential, mean `mean_s`; 0: as modeled)."""
    if not mean_s:
        return records
    rng = random.Random(seed)
    return [msgspec.structs.replace(r, ttft=r.ttft + rng.expovariate(1 / mean_s)) if r.ttft is not None else r
            for r in records]


@dataclass(frozen=True)
class Jitter:
    lanes: int
    requests: int  # the twin's successful profiled requests
    last_end_s: float  # the twin's last end, warmup and drain included (modeled s; over the speed: wall s)
    deviations: tuple[float, ...]  # per draw, the largest of the paired TTFT p50 / p90 and ITL p50, sorted
    # the twin's TTFT and ITL distributions (`request_metrics`' `ttft_s`, `itl_s`): the figures a run
    # of this plan is judged against (`--speed auto` reads its probe's host error against them)
    reference: dict

    @property
    def worst(self) -> float:
        return self.deviations[-1] if self.deviations else 0.0


def jitter(settings: BenchSettings, sessions: list, speed: float, draws: int, sim: Deployment | None = None,
           reaction_s: float = QUIET_REACTION_S, host_error_s: float = QUIET_HOST_ERROR_S) -> Jitter:
    """The plan of `settings` (its concurrency and window) against its twin at `speed`, `draws` times."""
    sim = sim or Deployment()
    with tempfile.TemporaryDirectory(prefix="agentx-jitter-") as tmp:
        twin_out = Path(tmp) / "twin"
        VirtualRun(settings.replace(out=str(twin_out)), sessions, sim,
                   client_delay_s=CLIENT_REACTION_S * speed).execute()
        twin = read_records(twin_out)
        devs = []
        for k in range(draws):
            out = Path(tmp) / f"draw{k}"
            LateEnds(settings.replace(out=str(out)), sessions, sim, mean_s=reaction_s * speed, seed=k).execute()
            p = paired_ttft(measured(read_records(out), host_error_s * speed, k), twin)
            devs.append(max(abs(p["ttft_p50_rel"] or 0.0), abs(p["ttft_p90_rel"] or 0.0), abs(p["itl_p50_rel"] or 0.0))
                        if p else float("inf"))
    ok = [r for r in twin if r.phase == "profile" and r.error is None]
    reference = {"ttft_s": distribution([r.ttft for r in ok]),
                 "itl_s": distribution([r.itl for r in ok if r.itl is not None])}
    return Jitter(settings.plan.concurrency, len(ok), max((r.end or 0.0) for r in twin), tuple(sorted(devs)),
                  reference)
