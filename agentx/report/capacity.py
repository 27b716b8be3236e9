"""The capacity plan's HTML report (`agentx sim plan`, `agentx report PLAN_DIR --html`): from the
plan's `plan.json`, per configuration its curves against concurrency with the SLO drawn and the
answer marked, the hit rate beside the KV capacity, and the frontier across configurations."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

from agentx.errors import AgentxError
from agentx.report.figures import figure
from agentx.report.toolkit import bundle_for, page_assets, plotly_js, script_json, templates, trace_types
from agentx.results.frontier import pareto
from agentx.virtual.answer_table import answer_rows, winner_line

SLO_LINE = {"color": "#d1495b", "dash": "dash", "width": 1.5}
ANSWER = {"symbol": "star", "size": 16, "color": "#d1495b", "line": {"width": 1, "color": "#222"}}


def is_plan_folder(path: Path) -> bool:
    return (Path(path) / "plan.json").is_file()


def read_plan(path: Path) -> dict:
    file = Path(path) / "plan.json"
    try:
        plan = json.loads(file.read_text())
    except (OSError, ValueError) as e:
        raise AgentxError(f"{file}: cannot read the plan's answer ({e})") from None
    for key in ("slo", "answers"):
        if key not in plan:
            raise AgentxError(f"{file}: field {key!r} missing (not written by `agentx sim plan`)")
    return plan


SMALL = {"height": 340, "legend": {"y": -0.32}, "margin": {"b": 60}}  # room for the axis title above the legend


def _axis(levels: list[int]) -> dict:
    """Concurrency on a log axis when it spans a factor of 8 or more (1, 2, 4, ... 64)."""
    log = bool(levels) and min(levels) > 0 and max(levels) / min(levels) >= 8
    return {"title": {"text": "concurrency (lanes)"}, "type": "log" if log else "linear", "tickvals": levels}


def _curve(answer: dict, key: str, name: str, scale: float = 1.0, **trace) -> dict:
    pts = answer["curve"]
    return {"type": "scatter", "mode": "lines+markers", "name": name, "x": [p["concurrency"] for p in pts],
            "y": [None if p.get(key) is None else p[key] * scale for p in pts],
            "hovertemplate": f"c%{{x}}: %{{y:,.4~g}}<extra>{name}</extra>", **trace}


def _answer_marker(answer: dict, key: str) -> list[dict]:
    best = answer.get("max_concurrency")
    at = answer.get("at_max") or {}
    if best is None or at.get(key) is None:
        return []
    return [{"type": "scatter", "mode": "markers", "name": f"answer: {best} lanes", "x": [best],
             "y": [at[key]], "marker": ANSWER, "hovertemplate": "the answer: c%{x}<extra></extra>"}]


def _slo_line(xs: list, ys: list, name: str) -> dict:
    """The SLO threshold as a trace (so that the axes' autorange includes it)."""
    return {"type": "scatter", "mode": "lines", "name": name, "x": xs, "y": ys, "line": SLO_LINE, "hoverinfo": "name"}


def slo_chart(answer: dict, key: str, threshold: float, title: str, y_title: str, text: str) -> dict:
    """A p90 figure against concurrency with its SLO threshold and the answer."""
    levels = [p["concurrency"] for p in answer["curve"]]
    line = _slo_line([min(levels), max(levels)], [threshold, threshold], text)
    return figure([_curve(answer, key, y_title), line, *_answer_marker(answer, key)], title, "", y_title,
                  xaxis=_axis(levels), **SMALL)


def throughput_chart(answer: dict) -> dict:
    levels = [p["concurrency"] for p in answer["curve"]]
    return figure([_curve(answer, "tok_s_per_gpu", "total tok/s per GPU"), *_answer_marker(answer, "tok_s_per_gpu")],
                  "Throughput per GPU", "", "total tok/s per GPU", xaxis=_axis(levels), **SMALL)


def cache_chart(answer: dict) -> dict:
    """Measured (and theoretical) hit rate and mean KV usage against concurrency; a vertical line
    where the lanes' mean prompts fill the KV capacity: past it the prefix cache evicts (the cliff)."""
    levels = [p["concurrency"] for p in answer["curve"]]
    data = [_curve(answer, "hit_rate", "measured hit rate %", 100),
            _curve(answer, "theoretical_hit_rate", "theoretical hit rate %", 100, line={"dash": "dot"}),
            _curve(answer, "kv_usage_mean", "KV usage mean %", 100, yaxis="y2", line={"color": "#888"})]
    isl = sorted(p["isl_mean"] for p in answer["curve"] if p.get("isl_mean"))
    title = "Prefix cache against KV capacity"
    if isl and answer.get("kv_capacity_tokens"):
        fill = answer["kv_capacity_tokens"] / isl[len(isl) // 2]
        title += f" ({answer['kv_capacity_tokens']:,} tokens = {fill:,.1f} mean prompts)"
        if fill <= 1.5 * max(levels):  # beyond the grid it would only squash the curves
            data.append({"type": "scatter", "mode": "lines", "name": f"KV capacity = {fill:,.1f} mean prompts",
                         "x": [fill, fill], "y": [0, 100], "line": {"color": "#335", "dash": "dash", "width": 1.5},
                         "hoverinfo": "name"})
    return figure(data, title, "", "hit rate %", xaxis=_axis(levels),
                  yaxis={"range": [0, 100]}, yaxis2={"title": {"text": "KV usage %"}, "overlaying": "y",
                                                     "side": "right", "range": [0, 100], "showgrid": False},
                  **{**SMALL, "margin": {"b": 60, "r": 60}})


def frontier_chart(answers: list[dict], slo: dict) -> dict:
    """Throughput per GPU against p90 E2E-normalized interactivity: a curve per configuration
    through its points by concurrency, the Pareto frontier over every configuration, the SLO."""
    data, every = [], []
    for a in answers:
        pts = [p for p in a["curve"] if p.get("p90_norm") is not None and p.get("tok_s_per_gpu") is not None]
        every += [{**p, "config": a["config"]} for p in pts]
        data.append({"type": "scatter", "mode": "lines+markers+text", "name": a["config"],
                     "x": [p["p90_norm"] for p in pts], "y": [p["tok_s_per_gpu"] for p in pts],
                     "text": [f"c{p['concurrency']}" for p in pts], "textposition": "top center",
                     "hovertemplate": "%{text}: %{x:.3~g} tok/s, %{y:,.4~g} tok/s/GPU<extra>%{fullData.name}</extra>"})
    best = sorted(_pareto(every), key=lambda p: p["p90_norm"])
    data.append({"type": "scatter", "mode": "lines", "name": "frontier over every configuration",
                 "x": [p["p90_norm"] for p in best], "y": [p["tok_s_per_gpu"] for p in best],
                 "line": {"color": "#222", "dash": "dot", "width": 3}, "hoverinfo": "skip"})
    x, ys = slo["p90_e2e_normalized_interactivity"], [p["tok_s_per_gpu"] for p in every]
    if ys:
        data.append(_slo_line([x, x], [min(ys), max(ys)], f"SLO: p90 E2E-normalized interactivity >= {x:g} tok/s"))
    return figure(data, "Frontier: total tok/s per GPU vs p90 E2E-normalized interactivity",
                  "p90 E2E-normalized interactivity tok/s", "total tok/s per GPU", height=480)


def _pareto(rows: list[dict]) -> list[dict]:
    """The points no other point beats on both interactivity and throughput per GPU."""
    keyed = [{**r, "id": i, "p90_e2e_norm_intvty": r["p90_norm"], "tput_per_gpu": r["tok_s_per_gpu"]}
             for i, r in enumerate(rows)]
    return pareto(keyed, "p90_e2e_norm_intvty", "tput_per_gpu")


def plan_figures(plan: dict) -> dict[str, dict]:
    """Every figure of the page by its div id: `frontier`, then `cN-throughput`, `cN-interactivity`,
    `cN-ttft`, `cN-cache` for the N-th configuration."""
    slo = plan["slo"]
    x, y = slo["p90_e2e_normalized_interactivity"], slo["p90_ttft_s"]
    figures = {"frontier": frontier_chart(plan["answers"], slo)}
    for i, a in enumerate(plan["answers"]):
        figures[f"c{i}-throughput"] = throughput_chart(a)
        figures[f"c{i}-interactivity"] = slo_chart(a, "p90_norm", x, "p90 E2E-normalized interactivity",
                                                   "tok/s", f"SLO >= {x:g} tok/s")
        figures[f"c{i}-ttft"] = slo_chart(a, "p90_ttft", y, "p90 TTFT", "seconds", f"SLO <= {y:g} s")
        figures[f"c{i}-cache"] = cache_chart(a)
    return figures


def write_plan_report(path: Path, out: Path | None = None) -> Path:
    """report.html in the plan's folder; returns its path."""
    path = Path(path)
    plan = read_plan(path)
    out = out or path / "report.html"
    slo = plan["slo"]
    figures = plan_figures(plan)
    page = templates().get_template("plan.html.j2").render(
        title=f"agentx capacity plan: {path.resolve().name}", settings=plan.get("plan") or {}, slo=slo,
        rows=answer_rows(plan["answers"]), winner=winner_line(plan["answers"]),
        configs=[a["config"] for a in plan["answers"]],
        generated=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        plotly_js=plotly_js(bundle_for(trace_types(figures))), data_json=script_json(figures), **page_assets())
    out.write_text(page, encoding="utf-8")
    return out
