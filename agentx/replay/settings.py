"""The settings of a bench run, built from the configs of the stages that use them: the plan's
(`PlanConfig`), the content's (`ContentConfig`), the target's and the result's labels. Each
option is declared once, in its stage's config; `BenchSettings.build()` takes them all as
keywords and hands each to the config that declares it (`seed` to both plan and content)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace

from agentx.content.tokens import ContentConfig
from agentx.replay.plan import PlanConfig

# PlanConfig fields the driver sets for each run (not options)
_PER_RUN = ("run_id", "lead")


@dataclass(frozen=True)
class TargetConfig:
    """The server under test and how the client talks to it."""

    url: str
    model: str | None = None  # None: discovered from /v1/models
    wire: str = "tokens"  # or "chat"
    tokenizer: str | None = None  # tokenizer.json for the chat wire (None: the sim's)
    request_timeout: float = 600.0
    keep_chunks: bool = False
    server_metrics: str | None = ""  # "" -> the target's /metrics; None -> no scraping
    grace: float = 60.0  # seconds in-flight requests may finish after the window
    clock_scale: float = 1.0  # the target runs this much faster than what it models (sim --speed)
    session_headers: str = "plain"  # how stream session ids are sent: plain, dynamo, sglang, llm-d (identity.py)
    probe_cache: int = 0  # cache-correctness probes before and after the run (0: none)
    # sent on every request to the target (--api-key, --header; endpoint.py); run.json keeps the names only
    headers: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Labels:
    """What the result says it measured (identity, per-GPU and cost figures)."""

    gpus: int | None = None
    hardware: str | None = None
    engine: str | None = None
    engine_block_size: int | None = None  # KV block of the engine (None: what the server publishes)
    dataset: str | None = None
    variant: str | None = None
    scenario: str | None = None
    cost_basis: str = "neocloud"
    slo: tuple[tuple[str, float], ...] = ()  # goodput's objectives, (ttft|tpot|e2el, ms) (metrics/goodput.py)


_PARTS = {"target": TargetConfig, "plan": PlanConfig, "content": ContentConfig, "labels": Labels}


@dataclass(frozen=True)
class BenchSettings:
    target: TargetConfig
    plan: PlanConfig
    content: ContentConfig
    labels: Labels
    out: str = ""  # the run folder

    @classmethod
    def build(cls, out: str = "", **options) -> BenchSettings:
        """Settings from flat options (`url=..., concurrency=..., seed=...`)."""
        parts = {name: part(**_share(part, options)) for name, part in _PARTS.items()}
        _check_known(options)
        return cls(out=out, **parts)

    def replace(self, **options) -> BenchSettings:
        """A copy with some flat options changed (`concurrency=...`, `out=...`)."""
        _check_known({k: v for k, v in options.items() if k != "out"})
        changes = {name: replace(getattr(self, name), **_share(part, options)) for name, part in _PARTS.items()}
        return replace(self, **changes, **({"out": options["out"]} if "out" in options else {}))

    def flat(self) -> dict:
        """Every option by name, as `run.json` records them."""
        out = {}
        for name in _PARTS:
            out.update(asdict(getattr(self, name)))
        for key in _PER_RUN:
            del out[key]
        out["headers"] = [name for name, _ in self.target.headers]  # never a credential's value
        return {**out, "out": self.out}


def _share(part, options: dict) -> dict:
    names = {f.name for f in fields(part)}
    return {k: v for k, v in options.items() if k in names}


def _check_known(options: dict) -> None:
    known = {f.name for part in _PARTS.values() for f in fields(part)}
    unknown = set(options) - known
    if unknown:
        raise TypeError(f"unknown bench settings: {', '.join(sorted(unknown))}")
