"""`agentx demo` (SPEC section 10, "The demo"): the bundled real traces on the simulated engine
(8 x H200 serving Qwen3-235B-A22B), in two parts. First the frontier of several concurrencies in
virtual time: seconds of CPU, deterministic, the same figures on any machine whatever its load;
the main result. Then one of its points replayed over HTTP against `agentx sim serve`, as `bench`
measures a real server, and checked against its virtual twin (the same plan in virtual time):
valid, or NOT VALID in one line saying why and what to do, beside the twin's figures, which a
busy host does not move."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from agentx.cli.bench import (ALLOW_INVALID_HELP, _bench_with_twin, _concurrencies, _default_out,
                              _exit_if_invalid, _progress, parse_speed)
from agentx.cli.common import _corpus, _warn, console

# The demo's plan (SPEC section 10, "The demo"). The frontier: these lanes for this many modeled
# seconds each, in virtual time (about 5 CPU s in all). The point over HTTP: of DEMO_CANDIDATES, the
# one whose twin a quiet host's jitter moves least at DEMO_SPEED (`virtual/jitter.py`, DEMO_DRAWS
# draws each: about 6 CPU s), for DEMO_DURATION modeled seconds: its warmup, window and drain take
# 75-110 wall s at speed 2, which keeps the demo within three minutes; which point holds changes
# with the engine profile, so the demo finds it each time rather than naming one. `--speed auto` (the
# default) then probes this host at that point and runs it at DEMO_SPEED, or slower where the probe
# says its host error would not hold (`replay/speed.py`).
DEMO_FRONTIER = "1,2,4,8,12,16,24,32"
DEMO_FRONTIER_DURATION = 600.0
DEMO_CANDIDATES = "8,12,16,24"
DEMO_DRAWS = 6
DEMO_DURATION = 120.0
DEMO_SPEED = 2.0
DEPLOYMENT = "8 x H200 serving Qwen3-235B-A22B (BF16, the vLLM profile)"

# (SPEC section 8 name, unit, scale, format) of the frontier's columns, then the HTTP point's
FRONTIER_COLUMNS = (("p50_ttft", "ms", 1000, "{:,.1f}"), ("p90_ttft", "ms", 1000, "{:,.1f}"),
                    ("p90_e2e_norm_intvty", "tok/s", 1, "{:,.1f}"), ("tput_per_gpu", "tok/s", 1, "{:,.0f}"),
                    ("server_prefix_hit_rate", "%", 100, "{:.1f}"))
POINT_COLUMNS = (("p50_ttft", "ms", 1000, "{:,.1f}"), ("p90_ttft", "ms", 1000, "{:,.1f}"),
                 ("p50_itl", "ms", 1000, "{:,.2f}"), ("p90_e2e_norm_intvty", "tok/s", 1, "{:,.1f}"),
                 ("tput_per_gpu", "tok/s", 1, "{:,.0f}"))
COLUMN_WORDS = ("p50_ttft / p90_ttft: time to first token, median / 90th percentile; p50_itl: inter-token latency, "
                "median; p90_e2e_norm_intvty: output tokens per second of a request's whole latency, 90th "
                "percentile (higher is better); tput_per_gpu: input + output tokens per second per GPU; "
                "server_prefix_hit_rate: prompt tokens the engine served from its prefix cache "
                "(names: SPEC section 8)")


def _say(line: str = "") -> None:
    console.print(line, highlight=False, markup=False, soft_wrap=True)


def _words(text: str) -> None:
    """A paragraph, indented under the table it explains."""
    import textwrap

    for line in textwrap.wrap(text, max(console.width - 2, 60)):
        _say(f"  {line}")


def _cell(value, scale: float, fmt: str) -> str:
    return "-" if value is None else fmt.format(value * scale)


def _header(first: tuple[str, int], columns, last: str = "") -> None:
    label, width = first
    _say(f"{label:<{width}}" + "".join(f"{name:>{max(len(name), 9) + 2}}" for name, *_ in columns) + f"  {last}")
    _say(" " * width + "".join(f"{unit:>{max(len(name), 9) + 2}}" for name, unit, *_ in columns))


def _row(label: str, width: int, figures: dict, columns, last: str = "") -> None:
    _say(f"{label:<{width}}" + "".join(f"{_cell(figures.get(name), scale, fmt):>{max(len(name), 9) + 2}}"
                                       for name, _, scale, fmt in columns) + f"  {last}")


def figures(result: dict) -> dict:
    """A result's figures by their SPEC section 8 names (what the demo prints)."""
    rm, sm = result["request_metrics"], result["server_metrics"]
    ttft, itl = rm.get("ttft_s") or {}, rm.get("itl_s") or {}
    norm, tp = rm.get("e2e_normalized_interactivity_tok_s") or {}, rm.get("throughput") or {}
    return {"p50_ttft": ttft.get("p50"), "p90_ttft": ttft.get("p90"), "p50_itl": itl.get("p50"),
            "p90_e2e_norm_intvty": norm.get("p90"), "tput_per_gpu": tp.get("total_tok_s_per_gpu"),
            "server_prefix_hit_rate": sm.get("prefix_hit_rate")}


def twin_figures(tw: dict) -> dict:
    """The virtual twin's figures (run.json's `twin`) by the same names."""
    return {"p50_ttft": tw.get("ttft_p50_s"), "p90_ttft": tw.get("ttft_p90_s"), "p50_itl": tw.get("itl_p50_s"),
            "p90_e2e_norm_intvty": tw.get("e2e_norm_intvty_p90"), "tput_per_gpu": tw.get("tput_per_gpu")}


def run_frontier(sessions: list, levels: list[int], duration: float, out: Path, dataset: str) -> list[tuple[int, dict]]:
    """Part 1: each level in virtual time, its row printed as it ends; then which are on the frontier."""
    from agentx.engine.config import Deployment
    from agentx.metrics.verdict import short_verdict
    from agentx.replay.concurrency_sweep import sweep
    from agentx.replay.folder import command_line
    from agentx.replay.settings import BenchSettings
    from agentx.virtual.runner import sim_bench

    _say(f"1/2  the frontier in virtual time: {len(levels)} concurrencies, {duration:g} modeled s each, "
         f"deterministic (no host load moves these figures) -> {out}/")
    _header(("lanes", 7), FRONTIER_COLUMNS, "valid")
    settings = BenchSettings.build(url="virtual", concurrency=levels[0], duration=duration, gpus=8, hardware="H200",
                                   dataset=dataset, grace=30.0)
    sim = Deployment()

    def done(n: int, folder: Path, result: dict) -> None:
        _row(f"c{n}", 7, figures(result), FRONTIER_COLUMNS, short_verdict(result))

    results = sweep(settings, sessions, levels, out, command_line(), None, done,
                    lambda s, sess, command, tick: sim_bench(s, sess, sim, command, tick))
    _words(COLUMN_WORDS)
    _words(frontier_line(results))
    return results


def frontier_line(results: list[tuple[int, dict]]) -> str:
    """Which valid points are on the canonical frontier (SPEC section 5), which are below it, and
    which answer nothing for low confidence (SPEC section 3, "Settled: confidence"): the frontier
    of `agentx frontier` over the same points."""
    from agentx.metrics.confidence import ANSWER_SPREAD_LIMIT, confidence
    from agentx.report.frontier_chart import frontier_rows
    from agentx.results.frontier import CANONICAL, pareto

    rows = [r for r in frontier_rows([(f"c{n}", result) for n, result in results]) if r["valid"]]
    low = {r["id"]: confidence(r["spread"], ANSWER_SPREAD_LIMIT) for r in rows}
    low = {name: c for name, c in low.items() if c["low"]}
    on = {r["id"] for r in pareto([r for r in rows if r["id"] not in low], *CANONICAL)}
    names = [f"c{n}" for n, _ in results]
    below = [n for n in names if n not in on and n not in low]
    line = (f"frontier ({CANONICAL[1]} against {CANONICAL[0]}, SPEC section 5): "
            f"{', '.join(n for n in names if n in on) or 'no point answers'}"
            + (f"; below it (another point has more of both, or NOT VALID): {', '.join(below)}" if below else ""))
    if low:
        need = sorted(c["need_trees"] for c in low.values() if c.get("need_trees"))
        line += (f"; low confidence, no answer (SPEC section 3): {', '.join(n for n in names if n in low)}: a TTFT "
                 f"interval over {ANSWER_SPREAD_LIMIT:.0%} wide or under 10 session trees"
                 + (f" (about {need[0]:,}-{need[-1]:,} trees would do)" if need else "")
                 + "; their rows are measurements of this sample of sessions, not an answer: a frontier to defend "
                 "needs more sessions (docs/virtual-time.md)")
    return line


def run_point(sessions: list, n: int, duration: float, speed: float, out: Path, dataset: str) -> dict:
    """Part 2: `n` lanes over HTTP against `agentx sim serve --speed SPEED` (bench's run with its
    virtual twin); its figures beside the twin's, and one verdict line."""
    from agentx.engine.launch import sim_server
    from agentx.replay.folder import command_line
    from agentx.replay.settings import BenchSettings

    folder = out / f"c{n}"
    _words(f"c{n} over HTTP: `agentx sim serve --speed {speed:g}` on 127.0.0.1 (the modeled hardware run {speed:g}x "
           f"faster; the replay clock follows, so every figure is modeled time), {duration:g} modeled s after a "
           f"warmup, then its virtual twin (the same plan in virtual time) -> {folder}/")
    out.mkdir(parents=True, exist_ok=True)
    with sim_server("--speed", f"{speed:g}", "--truth-log", str(out / "sim_truth.jsonl")) as url:
        settings = BenchSettings.build(url=url, concurrency=n, duration=duration, gpus=8, hardware="H200",
                                       engine="agentx-sim", dataset=dataset, clock_scale=speed, grace=30.0,
                                       power=f"dcgm:{url}/metrics", out=str(folder))  # the sim's modeled GPU power
        with _progress() as tick:
            result = _bench_with_twin(settings, sessions, command_line(), tick)
    print_point(result, n, speed)
    return result


def print_point(result: dict, n: int, speed: float) -> None:
    """The run's figures, its twin's, the two compared over the same requests, the verdict."""
    from agentx.metrics.verdict import verdict

    tw = result.get("twin") or {}
    width = 46
    _header(("", width), POINT_COLUMNS)
    _row(f"c{n} over HTTP (measured)", width, figures(result), POINT_COLUMNS)
    if tw.get("checked"):
        _row(f"c{n} virtual twin (no host load moves these)", width, twin_figures(tw), POINT_COLUMNS)
        paired = tw.get("paired_ttft_s") or {}
        if paired.get("ttft_p50_rel") is not None:
            rel = {"p50_ttft": paired["ttft_p50_rel"], "p90_ttft": paired["ttft_p90_rel"],
                   "p50_itl": paired.get("itl_p50_rel")}
            _row(f"HTTP / twin - 1, the {paired['n']} requests both hold", width, rel,
                 tuple((name, "", 100, "{:+.1f} %") for name, *_ in POINT_COLUMNS), "(twin rules: limit 2.5%)")
    else:
        _say(f"  virtual twin: not checked ({tw.get('reason') or 'the target published no configuration'})")
    host = (result.get("host_error") or {}).get("ttft_s")
    if host:
        _say(f"  host error (measured minus modeled TTFT, per request): median {host['p50'] * 1000:+,.1f} modeled ms "
             f"({host['p50'] * 1000 / speed:+,.2f} wall ms at speed {speed:g})")
    _say(f"c{n} over HTTP: {verdict(result, remedy(result, speed))}")


def remedy(result: dict, speed: float) -> str | None:
    """What the demo's user can do about the run's first failed rule, where the demo knows better
    than the generic advice: the twin's figures to use instead, and the speed to run at."""
    from agentx.metrics.verdict import failed_rules
    from agentx.replay.speed import SCALING_RULES, slower_speed

    failed = failed_rules(result)
    if not failed:
        return None
    use = ("use the virtual twin's row above (the same plan in virtual time, which no host load moves)"
           if (result.get("twin") or {}).get("checked") else "use the frontier's figures above (virtual time)")
    first = failed[0]["rule"]
    if first in SCALING_RULES:
        fits = slower_speed(result["validity"]["rules"], speed)
        return (f"{use}, or `agentx demo --speed {fits:g}`, which would keep it under half its limit" if fits
                else f"{use}; no speed down to 0.25 would keep it under half its limit on this host now")
    if first == "client" and (result.get("client_health") or {}).get("verdict") == "late_dispatch":
        return f"{use}, or run `agentx demo` again when no other work holds this machine's CPU"
    if first.startswith("twin"):
        return f"{use}, or run `agentx demo` again on a quiet machine"
    return None


def next_steps(out: Path, point: Path | None) -> None:
    _say("next:")
    _say("  benchmark your own server:    agentx bench --url http://HOST:PORT --concurrency 8,16,32 --html")
    _say("  other deployments, no server: agentx sim bench --hardware B200 --concurrency 8,16,32 "
         "(or agentx sim plan PLAN.yaml)")
    _say(f"  this demo's charts:           {out}/report.html" + (f"; the HTTP run's whole summary: agentx report {point}"
                                                                   if point else ""))


def pick_point(sessions: list, candidates: list[int], duration: float, speed: float, dataset: str):
    """Of `candidates`, the lanes whose twin a quiet host's jitter moves least (virtual time): its
    `virtual.jitter.Jitter` (one candidate: its twin alone, no draws)."""
    from agentx.replay.settings import BenchSettings
    from agentx.virtual.jitter import jitter

    def run(n: int, draws: int):
        settings = BenchSettings.build(url="virtual", concurrency=n, duration=duration, gpus=8, hardware="H200",
                                       dataset=dataset, grace=30.0)
        return jitter(settings, sessions, speed, draws)

    if len(candidates) == 1:
        return run(candidates[0], 0)
    _words(f"which point: of {', '.join(f'c{n}' for n in candidates)}, the one whose figures a quiet host's jitter "
           f"moves least off its virtual twin at speed {speed:g} (virtual time: its twin, then {DEMO_DRAWS} replays "
           "with each end heard late and each TTFT measured late at random; the twin rules' limit is 2.5%)")
    found = [run(n, DEMO_DRAWS) for n in candidates]
    best = min(found, key=lambda j: (j.worst, j.last_end_s))
    _words("largest deviation over the draws: " + ", ".join(f"c{j.lanes} {j.worst:.1%}" for j in found)
           + f" -> c{best.lanes} (about {best.last_end_s / speed:,.0f} wall s over HTTP)"
           + ("" if best.worst <= 0.025 else "; even it moved past 2.5%: a quiet host's run may come NOT VALID"))
    return best


def probe_speed(sessions: list, point, dataset: str, probe_s: float | None = None):
    """`--speed auto`: this host probed at the point's lanes and the demo's speed (`replay/speed.py`:
    its timer, then `probe_s` wall s over HTTP), the probe's host error read against the point's
    twin; its `SpeedChoice` (printed): the fastest speed up to DEMO_SPEED at which the point's
    host-error and sim-lag rules stay within their margin, or not `valid` where no speed can be."""
    from agentx.replay.speed import PROBE_S, auto_speed

    n, probe_s = point.lanes, probe_s or PROBE_S
    _say(f"speed auto: probing this host at c{n} (its timer, then {probe_s:g} wall s over HTTP at speed "
         f"{DEMO_SPEED:g}; its host error read against c{n}'s twin) ...")
    choice = auto_speed(sessions, n, probe_s=probe_s, speed=DEMO_SPEED, reference=point.reference, cap=DEMO_SPEED,
                        dataset=dataset)
    if choice.stalled:  # one stall of the host fails a short probe's p99: a second probe tells a busy host
        _say(f"{choice.line()}; probing again ...")
        choice = auto_speed(sessions, n, probe_s=probe_s, speed=DEMO_SPEED, reference=point.reference,
                            cap=DEMO_SPEED, dataset=dataset)
    wall = f"(about {point.last_end_s / choice.speed:,.0f} wall s over HTTP)"
    verdict = (f"; so c{n} should be valid here at speed {choice.speed:g} {wall}" if point.worst <= 0.025 else
               f"; this host holds it, but c{n}'s own jitter moved past 2.5% (above): its run may come NOT VALID {wall}")
    _say(choice.line() + (verdict if choice.valid else ""))
    return choice


def http_part(sessions: list, candidates: list[int], duration: float, speed: float | None, out: Path,
              corpus) -> tuple[Path | None, dict]:
    """Part 2: the point (picked at the speed asked, `auto`: DEMO_SPEED), the speed (`auto`: this
    host probed at that point), its run over HTTP; (its folder, its result). Where `--speed auto`
    finds no speed can be valid here, the point is not run (NOT VALID)."""
    _say("2/2  one point over HTTP against the simulated engine, checked against its virtual twin")
    point = pick_point(sessions, candidates, duration, speed or DEMO_SPEED, corpus.label)
    if speed is None:
        choice = probe_speed(sessions, point, corpus.label)
        speed = choice.speed if choice.valid else None
    if speed is None:
        _say(f"c{point.lanes} over HTTP: NOT VALID: not run: no speed can be valid on this host now (above); the "
             "frontier's figures stand (virtual time)")
        return None, {"validity": {"valid": False}}
    n = point.lanes
    return out / f"c{n}", run_point(sessions, n, duration, speed, out, corpus.label)


def demo_cmd(
    frontier: str = typer.Option(DEMO_FRONTIER, "--frontier", help="Lanes of the virtual-time frontier (part 1)."),
    frontier_duration: float = typer.Option(DEMO_FRONTIER_DURATION, "--frontier-duration", min=1,
                                            help="Modeled seconds per frontier point."),
    concurrency: str = typer.Option(DEMO_CANDIDATES, "--concurrency", help="Lanes of the point over HTTP (part 2), "
                                    "or several: the one whose twin a host's jitter moves least (virtual time)."),
    duration: float = typer.Option(DEMO_DURATION, "--duration", min=1, help="Modeled seconds of the point over HTTP."),
    speed: str = typer.Option("auto", "--speed", help="How much faster than the modeled hardware the sim runs (the "
                              "replay clock follows; each wall ms of host work becomes this many modeled ms), or "
                              f"`auto` (the default): probe this host at the point first (about 30 s) and take the "
                              f"fastest speed up to {DEMO_SPEED:g} at which its run should be valid here."),
    http: bool = typer.Option(True, "--http/--no-http", help="Part 2, the point over HTTP (--no-http: the frontier only)."),
    out: Optional[Path] = typer.Option(None, "--out", help="Results folder (default runs/demo-TIMESTAMP)."),
    allow_invalid: bool = typer.Option(False, "--allow-invalid", help=ALLOW_INVALID_HELP),
):
    """The bundled real traces on a simulated 8 x H200 (Qwen3-235B-A22B): the frontier of several
    concurrencies in virtual time (seconds), then one point over HTTP checked against its virtual
    twin (about two minutes)."""
    from agentx.report.html import write_report

    levels, candidates, fixed = _concurrencies(frontier), _concurrencies(concurrency), parse_speed(speed)
    corpus = _corpus([])  # the bundled real traces
    sessions = corpus.sessions(warn=_warn)
    out = out or _default_out("demo")
    out.mkdir(parents=True, exist_ok=True)
    _say(f"agentx demo: {len(sessions)} real Claude Code sessions (bundled, anonymized) replayed on a simulated "
         f"{DEPLOYMENT}")
    results = [r for _, r in run_frontier(sessions, levels, frontier_duration, out / "virtual", corpus.label)]
    point = http_part(sessions, candidates, duration, fixed, out / "http", corpus) if http else None
    if point is not None:
        results.append(point[1])
    _say(f"HTML report (both parts' charts and tables): {write_report(out)}")
    next_steps(out, point[0] if point and point[0] else None)
    _exit_if_invalid(results, allow_invalid)
