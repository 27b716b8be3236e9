"""Goodput: the requests that met every service-level objective, per second of the profiling
window and as a share of the profiled requests (SPEC §3). The objectives are vLLM bench's
(`--goodput ttft:MS tpot:MS e2el:MS`; AIPerf and GenAI-Perf define goodput the same way):
TTFT, time per output token after the first ((E2E - TTFT) / (OSL - 1), the ITL here) and
end-to-end latency, in milliseconds. A failed request meets none."""

from __future__ import annotations

from agentx.errors import AgentxError
from agentx.records import Record

SLO_KEYS = ("ttft", "tpot", "e2el")


def parse_slo(texts: list[str] | None) -> tuple[tuple[str, float], ...]:
    """`ttft:2000 tpot:50` (vLLM's form; also comma-separated, or the flag repeated)."""
    out: dict[str, float] = {}
    for text in texts or []:
        for part in text.replace(",", " ").split():
            key, sep, value = part.partition(":")
            try:
                ms = float(value)
            except ValueError:
                ms = -1.0
            if not sep or key not in SLO_KEYS or not ms > 0:
                raise AgentxError(f"want KEY:MS with KEY one of {', '.join(SLO_KEYS)} and MS > 0, got {part!r}", "slo")
            out[key] = ms
    return tuple(out.items())


def meets(r: Record, slo: dict[str, float]) -> bool:
    """Whether a request met every objective (a value it lacks, e.g. TPOT of a one-token answer,
    is not held against it)."""
    if r.error is not None:
        return False
    values = {"ttft": r.ttft, "tpot": r.itl, "e2el": r.end - r.start}
    return all(values[k] is None or values[k] * 1000 <= ms for k, ms in slo.items())


def goodput(prof: list[Record], slo, window_s: float | None, gpus: int | None = None) -> dict | None:
    """`{slo, met, of, share, requests_per_s, total_tok_s[, total_tok_s_per_gpu]}` over the profiled
    requests (tokens: prompt and answer tokens of the requests that met every objective); None
    without SLOs."""
    slo = dict(slo or ())
    if not slo:
        return None
    met = [r for r in prof if meets(r, slo)]
    tokens = sum((r.isl if r.isl is not None else r.isl_planned) + r.output_tokens
                 for r in met)
    out = {"slo_ms": slo, "met": len(met), "of": len(prof), "share": len(met) / len(prof) if prof else None,
           "requests_per_s": len(met) / window_s if window_s else None,
           "total_tok_s": tokens / window_s if window_s else None}
    if gpus and window_s:
        out["total_tok_s_per_gpu"] = tokens / window_s / gpus
    return out
