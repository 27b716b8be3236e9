"""The settings of a bench run, built from the configs of the stages that use them: the plan's
(`PlanConfig`), the content's (`ContentConfig`), the target's and the result's labels. Each
option is declared once, in its stage's config; `BenchSettings.build()` takes them all as
keywords and hands each to the config that declares it (`seed` to both plan and content)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace

from agentx.content.tokens import ContentConfig
from agentx.content.wire import WIRE_MODES
from agentx.data.evals import parse_spec
from agentx.engine.presets import COST_BASES
from agentx.errors import AgentxError
from agentx.options import check_bounds, option
from agentx.power.sources import check_spec
from agentx.replay.corpus import Corpus
from agentx.replay.hints import HintLevel
from agentx.replay.plan import PlanConfig
from agentx.replay.session_ids import PresetName

# PlanConfig fields the driver sets for each run (not options)
_PER_RUN = ("run_id", "lead")


@dataclass(frozen=True)
class TargetConfig:
    """The server under test and how the client talks to it."""

    url: str = option(help="Base URL of an OpenAI-compatible server (http://host:8000, with or without /v1).")
    model: str | None = option(None, "Model name; discovered from /v1/models when omitted.")
    wire: str = option("tokens", "tokens (/v1/completions, token ids) or chat (/v1/chat/completions).",
                       choices=WIRE_MODES)
    tokenizer: str | None = option(None, "tokenizer.json for --wire chat (default: the sim's).")
    request_timeout: float = option(600.0, "Seconds a request may take, whole answer included.", gt=0)
    keep_chunks: bool = option(False, "Keep every chunk's arrival time in the records.")
    server_metrics: str | None = option("", "Prometheus URL (default: the target's /metrics; 'none': off).")
    grace: float = option(60.0, "Seconds in-flight requests may finish after the window.", min=0)
    clock_scale: float = option(1.0, "Target runs X times faster than it models (agentx sim --speed X): delays "
                                "shrink, times are reported modeled.", gt=0)
    session_headers: str = option("plain", "How each stream's session id and its parent's are sent: plain, dynamo, "
                                  "sglang or llm-d (SPEC 2).", choices=PresetName)
    hints: str = option("none", "Harness hints sent per request: none, harness (what the agent harness knows) or "
                        "oracle (also the recorded gap to the stream's next request; SPEC 2).", choices=HintLevel)
    probe_cache: int = option(0, "Cache-correctness probes before and after the run.", min=0)
    evals: str = option("", "After the run, a bundled accuracy eval against the same endpoint: NAME or NAME:N "
                        "(N problems; `arith`: 100 arithmetic word problems, exact match on the final number); "
                        "stored with the point (SPEC 3, accuracy).", flag="--eval", metavar="NAME[:N]")
    eval_reference: float | None = option(None, "The model's reference accuracy on the eval (a share): the point "
                                           "is NOT VALID when the upper end of its accuracy's 95 % interval is more "
                                           "than 5 points below it (default: what the server publishes, if any).",
                                           min=0, max=1)
    # sent on every request to the target (--api-key, --header: endpoint.py); run.json keeps the names only
    headers: tuple[tuple[str, str], ...] = option((), cli=False)
    power: str = option("none", "GPU power telemetry, read every second: dcgm:URL (a DCGM exporter's /metrics), "
                        "nvidia-smi, amd-smi, rocm-smi, auto (the first that answers) or none; gives J/token and "
                        "measured tok/s per MW (SPEC 3).", metavar="SOURCE")
    workers: str = option("1", "Client processes sending the requests: N, or auto (one per core; with --ray one per "
                          "CPU of the cluster). Lane L goes to worker L mod N; the plan stays in this process.")
    ray: str | None = option(None, "Run the client workers as Ray actors on this cluster (auto, HOST:PORT; the ray "
                             "extra).")

    def __post_init__(self):
        check_bounds(self)
        check_spec(self.power)  # agentx/power/sources.py: dcgm:URL or a tool's name
        if self.evals:
            parse_spec(self.evals)  # a bundled eval's name and size (before the run, not after it)
        object.__setattr__(self, "workers", str(self.workers))  # (a recipe may give a number)
        if self.workers != "auto" and not (self.workers.isdigit() and int(self.workers) >= 1):
            raise AgentxError(f"want a count >= 1 or auto, got {self.workers!r}", "workers")

    def worker_count(self) -> int | None:
        """The workers asked for (None: auto)."""
        return None if self.workers == "auto" else int(self.workers)


@dataclass(frozen=True)
class Labels:
    """What the result says it measured (identity, per-GPU and cost figures)."""

    gpus: int | None = option(None, "GPUs of the deployment (per-GPU, cost and power figures).", min=1)
    hardware: str | None = option(None, "GPU kind for cost and power (H100, H200, B200, ...).")
    engine: str | None = option(None, "Engine label for the result (e.g. vllm-0.11).")
    engine_block_size: int | None = option(None, "The engine's KV block (default: what the server publishes).", min=1)
    dataset: str | None = option(None, cli=False)  # the corpus's label
    variant: str | None = option(None, cli=False)
    scenario: str | None = option(None, cli=False)
    cost_basis: str = option("neocloud", "Which price of the GPU counts.", choices=COST_BASES)
    slo: tuple[tuple[str, float], ...] = option((), cli=False)  # goodput's objectives (--slo: metrics/goodput.py)
    agreement: float = option(0.0, "Ask that another run of these settings come this close (a share, e.g. "
                              "0.05) on TTFT p50 and p90: a run whose 95 % interval of either is wider than this "
                              "x sqrt(2) is NOT VALID for its spread (SPEC 3). 0 (default): no such rule; the "
                              "intervals are printed anyway.", min=0, max=1)

    def __post_init__(self):
        check_bounds(self)


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


# offline scenarios: every request is profiled, however long the makespan; each session once
OFFLINE_WINDOW_S = 1e7


def offline_levels(corpus: Corpus, options: dict) -> list[int] | None:
    """With --offline N: the one level (N lanes) and the plan options it implies, set in `options`."""
    sc = corpus.parsed()
    if not sc or not sc.offline:
        return None
    options.update(warmup=False, reuse_sessions=False, duration=max(options.get("duration", 0), OFFLINE_WINDOW_S))
    return [sc.offline]


def open_loop(options: dict, levels: list[int]) -> bool:
    """Whether the plan is an open loop (schedule mode, or --request-rate, which implies it), set
    in `options`; an open loop has no lanes, so a --concurrency list is refused."""
    rate = options.get("request_rate") is not None
    if rate:
        options["mode"] = "schedule"
    schedule = options["mode"] == "schedule"
    if schedule and len(levels) > 1:
        raise AgentxError("an open loop at a request rate has no lanes to sweep" if rate else
                          "schedule mode replays at the recorded start times: it has no lanes to sweep", "concurrency")
    return schedule
