"""The sessions a run replays, chosen once for every command that chooses them (`bench`, `sim
bench`, `sim plan`, `sweep`): trace files or folders (default: the bundled real traces) in a format
(detected when None), less the requests over a maximum context (the variant), optionally one
provider's sessions only; or a fixed-sequence scenario instead. It also names itself: the
`dataset` and `variant` labels of the result."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from agentx.errors import AgentxError
from agentx.options import option
from agentx.traces.load import FORMATS

BUNDLED = "bundled WEKA sample"


@dataclass(frozen=True)
class Corpus:
    # declared settings (a plan's keys); their flags are the commands' own (cli/common.py), which
    # take their help from here
    paths: tuple[Path, ...] = ()  # empty: the bundled sample
    format: str | None = option(None, f"Input format: {', '.join(FORMATS)}; detected from the content when omitted "
                                "(mooncake-delta must be named).", choices=FORMATS, cli=False)
    max_context: str | None = option(None, "Drop every request with ISL + OSL over this many tokens (e.g. 256k): "
                                     "the 256k variant.", cli=False)  # as given: the variant's label
    provider: str | None = None
    scenario: str | None = option(None, "Fixed-length baseline instead of traces: ISL:OSL (e.g. 5000:500) or 1k1k, "
                                  "8k1k, 1k8k.", cli=False)  # (replay/scenarios.py)
    range_ratio: float | None = option(None, "Scenario lengths uniform in [R x L, L] (default: 0.8 for the named "
                                       "scenarios, as InferenceX runs them; 1 for ISL:OSL).", cli=False)
    offline: int = option(0, "Scenario offline: N requests queued at t = 0, throughput over the makespan (sets "
                          "--concurrency N, no warmup).", min=0, cli=False)
    base: Path | None = None  # relative paths are relative to this (a recipe's folder); labels keep them as given

    def __post_init__(self):
        if self.scenario is None and (self.range_ratio is not None or self.offline):
            raise AgentxError("--range-ratio and --offline need --scenario", "scenario")
        if self.scenario is not None:
            self.parsed()  # a bad scenario is an error before anything runs

    def parsed(self):
        """The typed scenario (None: traces)."""
        from agentx.replay.scenarios import parse_scenario

        return parse_scenario(self.scenario, self.range_ratio, self.offline) if self.scenario else None

    @property
    def label(self) -> str:
        """The result's `dataset` label."""
        if self.scenario:
            return self.parsed().name
        names = ", ".join(map(str, self.paths)) if self.paths else BUNDLED
        return names + (f" ({self.provider})" if self.provider else "")

    @property
    def labels(self) -> dict:
        """The result labels a corpus sets (BenchSettings keywords)."""
        return {"dataset": self.label, "variant": self.max_context, "scenario": self.label if self.scenario else None}

    def sessions(self, lanes: int = 1, warn: Callable[[str], None] | None = None, per_arrival: bool = False) -> list:
        """The sessions (a scenario makes one per lane of the largest level, `lanes`; at a request
        rate, `per_arrival`, sessions of one request each, which arrivals take in turn)."""
        from agentx.replay.scenarios import scenario_sessions

        if self.scenario:
            return scenario_sessions(self.parsed(), 1024, 1) if per_arrival else scenario_sessions(self.parsed(), lanes)
        from agentx.data import sample_traces
        from agentx.traces.load import load_sessions
        from agentx.traces.variants import limit_corpus, parse_tokens

        paths = [self.base / p if self.base and not Path(p).is_absolute() else Path(p) for p in self.paths]
        sessions = load_sessions(paths or [sample_traces()], self.format, warn=warn)
        sessions = limit_corpus(sessions, parse_tokens(self.max_context) if self.max_context else None)
        return _of_provider(sessions, self.provider) if self.provider else sessions


def _of_provider(sessions: list, provider: str) -> list:
    from agentx.traces.stats import by_provider

    groups = by_provider(sessions)
    if provider not in groups:
        raise AgentxError(f"no session of {provider!r} in the traces (they have: {', '.join(groups)})", "provider")
    return groups[provider]
