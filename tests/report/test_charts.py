"""Chart builders on a real sweep: every figure carries the run's numbers, not just a shape."""

import base64
import json
import re
import math
from collections import Counter

import numpy as np
import pytest

from agentx.errors import AgentxError
from agentx.metrics.tables import interval_note
from agentx.records import read_records
from agentx.report.flame import flamegraph
from agentx.report.figures import log_bars
from agentx.report.html import run_view, write_report
from agentx.report.overtime import over_time
from agentx.report.point import summary_rows, token_histogram
from agentx.report.rundata import read_run, sweep_folders
from agentx.report.frontier_chart import (LABELLED_POINTS, LEGEND_CURVES, PALETTE, TABLE_COLUMNS, Palette, frontier_chart,
                                          frontier_rows, place_labels,
                                 table_rows)
from agentx.report.timeline import TIME_BINS, request_timeline
from agentx.results import frontier as fr
from agentx.results.importer import chart_blobs


def test_histograms_count_every_successful_profiling_request(sweep):
    run = read_run(sweep / "c6")
    ok = [r for r in read_records(sweep / "c6") if r.phase == "profile" and r.error is None]
    for which in ("isl", "osl"):
        bars, fit = token_histogram(chart_blobs(run)["histograms"], which)["data"]
        assert sum(bars["y"]) == len(ok)
        assert sum(fit["y"]) == pytest.approx(len(ok), rel=0.1)  # the fit's mass over the binned range
    assert run.result["request_metrics"]["isl"]["n"] == len(ok)


def test_log_bars_draw_log_bins_on_a_log10_axis():
    """The one builder of the point's ISL / OSL and the dataset explorer's histograms: a bar per
    log-spaced bin spanning it on log10(x), its range in the hover, ticks at powers of ten."""
    bars, axis = log_bars([0.5, 5, 50, 5000], [3, 0, 7], "gaps", ",.4g", " s")
    assert bars["x"] == pytest.approx([math.log10(1.581), math.log10(15.81), math.log10(500)], abs=1e-3)
    assert bars["width"] == pytest.approx([1, 1, 2]) and bars["y"] == [3, 0, 7]
    assert bars["text"] == ["0.5-5 s", "5-50 s", "50-5,000 s"]
    assert axis == {"tickvals": [-1, 0, 1, 2, 3, 4], "ticktext": ["0.1", "1", "10", "100", "1,000", "10,000"]}


def test_over_time_charts_have_data_and_shade_the_warmup(sweep):
    run = read_run(sweep / "c6")
    figures = over_time(chart_blobs(run)["series"])
    assert set(figures) == {"latency", "queue", "kv", "inflight", "hit_rate", "sources", "throughput", "power",
                            "lateness"}
    for name, fig in figures.items():
        assert fig["data"], name
        for trace in fig["data"]:
            assert any(v is not None for v in trace["y"]), (name, trace["name"])
        shapes = fig["layout"]["shapes"]
        profile = [r for r in read_records(sweep / "c6") if r.phase == "profile"]
        assert shapes[0]["x1"] == pytest.approx(min(r.start for r in profile))  # warmup ends where profiling starts
    grid = figures["queue"]["data"][0]["x"]
    assert np.allclose(np.diff(grid), 1.0)  # one sample interval: 1 modeled second (a virtual-time run)
    # the GPU hit rate over time is the server's: its values sit within the run's range
    gpu = [v for v in next(t for t in figures["hit_rate"]["data"] if t["name"] == "GPU %")["y"] if v is not None]
    assert 0 <= min(gpu) and max(gpu) <= 100 and max(gpu) > 50
    # prompt tokens in flight at each grid time, counted from the records one by one
    total, unique = figures["inflight"]["data"][0]["y"], figures["inflight"]["data"][1]["y"]
    records = read_records(sweep / "c6")
    for t, y, u in zip(grid, total, unique):
        want = sum(r.isl_planned for r in records if r.start <= t < r.end)
        assert y == want and u <= y and (u > 0) == (want > 0)


def _decoded(typed: dict) -> np.ndarray:
    a = np.frombuffer(base64.b64decode(typed["bdata"]), "<" + typed["dtype"])
    return a.reshape([int(n) for n in typed["shape"].split(",")]) if "shape" in typed else a


def test_timeline_draws_every_request_and_its_hover(sweep):
    blobs = chart_blobs(read_run(sweep / "c6"))
    records = read_records(sweep / "c6")
    for rows in ("conversation", "lane"):
        fig = request_timeline(blobs[f"timeline_{rows}"])
        bars = [t for t in fig["data"] if t["mode"] == "lines"]
        markers = {t["name"]: t for t in fig["data"] if t["mode"] == "markers"}
        assert sum(len(_decoded(t["x"])) for t in markers.values()) == len(records)
        segments = sum(np.isnan(_decoded(t["x"])).sum() for t in bars)  # one NaN after each bar
        assert segments == 2 * sum(r.error is None for r in records) + sum(r.error is not None for r in records)
        first = next(r for r in records if r.phase == "profile" and r.error is None)
        assert _decoded(markers["request"]["customdata"])[0][:3].tolist() == [first.tree, first.node, first.isl]
    rows = np.concatenate([_decoded(t["y"]) for t in request_timeline(blobs["timeline_lane"])["data"]
                           if t["mode"] == "markers"])
    assert len(set(rows.tolist())) == len({r.lane for r in records})


def test_binned_timeline_counts_requests_in_flight(sweep):
    records = read_records(sweep / "c6")
    fig = request_timeline(chart_blobs(read_run(sweep / "c6"))["timeline_lane"], detail_limit=10)
    heat = fig["data"][0]
    z = _decoded(heat["z"])
    step = heat["dx"]
    assert z.shape[1] == TIME_BINS and fig["layout"]["meta"]["binned"]
    trees = fig["layout"]["meta"]["trees"]  # what a click on a row group opens: its first conversation
    assert len(trees) == z.shape[0] and set(trees) <= {r.tree for r in records}
    for b in (0, TIME_BINS // 3, TIME_BINS // 2):  # requests whose [start, end] bins cover bin b
        inflight = sum(1 for r in records if min(int(r.start // step), TIME_BINS - 1) <= b <= min(int(r.end // step),
                                                                                                  TIME_BINS - 1))
        assert np.nansum(z[:, b]) == inflight


def test_flamegraph_splits_each_prompt_into_cached_and_uncached(sweep):
    run = read_run(sweep / "c6")
    records = read_records(sweep / "c6")
    sizes = Counter(r.tree for r in records)
    tree = max(sizes, key=sizes.get)
    fig = flamegraph(run, tree)
    cached, uncached, output = (t["x"] for t in fig["data"])
    mine = sorted((r for r in records if r.tree == tree), key=lambda r: (r.node, r.start))
    assert len(cached) == len(mine) == sizes[tree]
    assert [c + u for c, u in zip(cached, uncached)] == [r.isl for r in mine]
    assert cached == [r.cached for r in mine] and output == [r.osl for r in mine]
    assert fig["layout"]["meta"]["nodes"] == [r.node for r in mine]
    custom = fig["data"][0]["customdata"]  # gaps before each request: replayed, and recorded (as planned)
    for k, r in enumerate(mine):
        prev = [p for p in mine[:k] if p.stream == r.stream]
        if prev:
            assert custom[k][6] == pytest.approx(r.start - prev[-1].end, abs=0.006)
            assert custom[k][7] == pytest.approx(r.planned - prev[-1].end, abs=0.006)
    subagent_streams = {r.stream for r in mine if r.stream != 0}
    assert len(fig["layout"]["shapes"]) == len(subagent_streams)
    assert flamegraph(run, 10_000)["data"] == []  # a tree not in the run says so


def test_frontier_and_table_of_the_sweep(sweep, tmp_path):
    runs = [read_run(p) for p in sweep_folders(sweep)]
    assert [r.path.name for r in runs] == ["c2", "c6"]
    results = [(r.path.name, r.result) for r in runs]
    rows = frontier_rows(results)
    # 240 s of 2 and 6 lanes: under 10 session trees each, so by default (SPEC 3, "Settled:
    # confidence") no point is on the frontier: both grey, apart, with the trees they would need
    (grey,) = frontier_chart(rows, *fr.CANONICAL)["data"]
    assert grey["marker"]["color"] == "#bbbbbb" and "low confidence" in grey["name"] and grey["mode"] == "markers"
    assert sorted(grey["customdata"]) == ["c2", "c6"] and all("session trees" in h for h in grey["hovertext"])
    fig = frontier_chart(rows, "p90_e2e_norm_intvty", "tput_per_gpu", spread_limit=0)  # no bound: the mechanics
    assert fig["layout"]["title"]["text"].endswith(", workload weka sample")
    ys = sorted(y for t in fig["data"] for y in t["y"])
    assert ys == sorted(r.result["request_metrics"]["throughput"]["total_tok_s_per_gpu"] for r in runs)
    assert fig["data"][0]["marker"]["symbol"] == "circle"  # the one engine's marker
    assert fig["data"][0]["marker"]["color"] == PALETTE[0]  # the one hardware's colour
    on = {cd for t in fig["data"] if "off the frontier" not in t["name"] for cd in t["customdata"]}
    assert on == {r["id"] for r in fr.frontier(rows, *fr.CANONICAL, spread_limit=0)[0].points}  # results' frontier, one definition
    ttft = frontier_chart(rows, "p90_ttft", "tput_per_gpu", spread_limit=0)
    xs = sorted(x for t in ttft["data"] for x in t["x"])
    assert xs == sorted(r.result["request_metrics"]["ttft_s"]["p90"] for r in runs)
    # tokens per $: total tokens (SPEC §3, §8), as the database's column
    usd = frontier_chart(rows, "p90_e2e_norm_intvty", "tok_per_usd_hyperscaler", spread_limit=0)
    assert sorted(y for t in usd["data"] for y in t["y"]) == pytest.approx(sorted(
        r.result["request_metrics"]["throughput"]["total_tok_s_per_gpu"] * 3600 / 1.41 for r in runs))
    # $ per million total tokens: 1e6 / tokens per $, lower is better (the cheaper point wins at equal x)
    per_m = frontier_chart(rows, "p90_e2e_norm_intvty", "usd_per_m_tok_neocloud", spread_limit=0)
    assert sorted(y for t in per_m["data"] for y in t["y"]) == pytest.approx(
        sorted(1e6 / r["tok_per_usd_neocloud"] for r in rows))
    cheap = [{**rows[0], "id": "a", "usd_per_m_tok_neocloud": 2.0}, {**rows[0], "id": "b", "usd_per_m_tok_neocloud": 1.0}]
    assert [r["id"] for r in fr.pareto(cheap, "p90_e2e_norm_intvty", "usd_per_m_tok_neocloud")] == ["b"]
    # measured power (bench --power): J per output token, lower is better, and measured tok/s per MW
    joules = frontier_chart(rows, "p90_e2e_norm_intvty", "joules_per_output_token", spread_limit=0)
    assert sorted(y for t in joules["data"] for y in t["y"]) == pytest.approx(sorted(
        r.result["power"]["joules_per_output_token"] for r in runs))
    mw = frontier_chart(rows, "p90_e2e_norm_intvty", "measured_tok_s_per_mw", spread_limit=0)
    assert sorted(y for t in mw["data"] for y in t["y"]) == pytest.approx(sorted(
        r.result["power"]["total_tok_s_per_mw"] for r in runs))
    rows = table_rows(results)
    assert [row["concurrency"] for row in rows] == [2, 6] and list(rows[0]) == TABLE_COLUMNS
    assert rows[1]["ok"] == runs[1].result["requests"]["succeeded"]


def test_summary_rows_define_every_figure(sweep):
    rows = summary_rows(read_run(sweep / "c2").result)
    assert all(definition for _, definition, _ in rows["distributions"])
    assert all(definition and value for _, value, definition in rows["figures"])
    result = read_run(sweep / "c2").result
    ttft = next(cells for label, _, cells in rows["distributions"] if label.startswith("TTFT ms"))
    p50 = result["request_metrics"]["ttft_s"]["p50"] * 1000
    note = interval_note(result["spread"]["ttft_s"]["p50"])  # its 95 % interval beside it: ' (-62/+61%)'
    assert ttft[0] == f"{p50:,.1f}{note}" and note.startswith(" (-") and note.endswith("%)")
    low = result["validity"]["low_sample"]  # marked beside every percentile row when so
    assert all(("(low sample: n = " in label) == low for label, _, _ in rows["distributions"])


def test_report_files_and_json_payload(sweep, tmp_path):
    path = write_report(sweep)
    assert path == sweep / "report.html"
    text = path.read_text()
    assert "<script src" not in text  # nothing fetched: plotly.js is inline
    assert re.findall(r'<link [^>]*href="([^:"]*:)', text) == ["data:"]  # the favicon, a data: URL
    assert "Plotly" in text and "c6" in text
    csv = (sweep / "sweep.csv").read_text().splitlines()
    assert csv[0].split(",") == TABLE_COLUMNS and len(csv) == 3
    payload = run_view(read_run(sweep / "c2"))
    json.dumps(payload, allow_nan=False)  # NaN would break JSON.parse in the page


def test_bad_folders_are_one_line_errors(tmp_path):
    with pytest.raises(AgentxError, match="neither a run folder"):
        write_report(tmp_path)
    (tmp_path / "run.json").write_text("{}")
    with pytest.raises(AgentxError, match="no result.json"):
        write_report(tmp_path)


def test_a_crowded_frontier_moves_labels_and_legend_to_the_hover(sweep):
    """Up to LABELLED_POINTS points on curves are labelled by concurrency and up to LEGEND_CURVES
    curves have a legend; past them both are in each point's hover only (SPEC §9)."""
    base = frontier_rows([(p.name, read_run(p).result) for p in sweep_folders(sweep)])

    def fig(deployments: int, levels: int) -> dict:
        rows = [{**r, "id": f"{d}-{k}-{r['id']}", "hardware": f"hw{d}", "concurrency": k,
                 "tput_per_gpu": r["tput_per_gpu"] / k, "p90_e2e_norm_intvty": r["p90_e2e_norm_intvty"] * k}
                for d in range(deployments) for k in range(1, levels + 1) for r in base[:1]]
        return frontier_chart(rows, "p90_e2e_norm_intvty", "tput_per_gpu", spread_limit=0)  # (few trees)

    few = fig(LEGEND_CURVES, LABELLED_POINTS // LEGEND_CURVES)  # every point on its curve's frontier
    assert all(t["mode"] == "lines+markers+text" for t in few["data"]) and "showlegend" not in few["layout"]
    crowded = fig(LEGEND_CURVES + 1, LABELLED_POINTS // LEGEND_CURVES)
    assert len(crowded["data"]) == LEGEND_CURVES + 1 and crowded["layout"]["showlegend"] is False
    assert all("text" not in t["mode"] and "%{hovertext}" in t["hovertemplate"] for t in crowded["data"])
    shown = [{h.split(" x ")[1].split(",")[0] for h in t["hovertext"]} for t in crowded["data"]]  # its deployment
    assert sorted(h for hw in shown for h in hw) == sorted(f"hw{d}" for d in range(LEGEND_CURVES + 1))


def test_colours_and_markers_stay_with_their_hardware_and_engine_under_filters(sweep):
    """A colour per hardware and a marker per engine over every name stored: the chart of a filtered
    set draws each curve as the chart of all points does."""
    base = frontier_rows([(p.name, read_run(p).result) for p in sweep_folders(sweep)])
    rows = [{**r, "id": f"{hw}-{eng}-{r['id']}", "hardware": hw, "engine": eng}
            for hw in ("B200", "H100", "H200") for eng in ("sglang", "vllm") for r in base]
    palette = Palette.of(rows)
    # a curve by its full name (the legend's short one names only what differs among the curves shown)
    style = lambda fig: {(t["legendgroup"], t["name"].partition(": ")[2]): (t["marker"]["color"], t["marker"]["symbol"])  # noqa: E731
                         for t in fig["data"]}
    every = style(frontier_chart(rows, *fr.CANONICAL, palette, spread_limit=0))  # (few trees: no bound)
    only = style(frontier_chart([r for r in rows if r["hardware"] == "H200"], *fr.CANONICAL, palette, spread_limit=0))
    assert only and all(every[name] == s for name, s in only.items())
    assert len({c for c, _ in every.values()}) == 3 and len({m for _, m in every.values()}) == 2
    h200_vllm = [s for (group, _), s in style(frontier_chart(rows, *fr.CANONICAL, spread_limit=0)).items()
                 if group.startswith("H200, vllm, " + str(base[0]["model"])) and group.endswith(", weka sample")]
    assert h200_vllm and set(h200_vllm) == {(PALETTE[2], "square")}


def test_labels_are_placed_apart():
    """Two points at one spot (two B200 points, both "c32") get different label positions; points far
    apart keep the first."""
    assert place_labels([(10, 100, "c32"), (10, 100, "c32 TP8")]) == ["top center", "bottom center"]
    assert place_labels([(1, 1, "c1"), (100, 100, "c2")]) == ["top center", "top center"]
    crowd = place_labels([(50 + i * 0.01, 50, f"c{i}") for i in range(4)] + [(0, 0, "a"), (100, 100, "b")])
    assert len(set(crowd[:4])) == 4


def test_numbers_by_unit():
    from agentx.report.toolkit import fmt_number
    assert [fmt_number(v) for v in (2484.0, 5140000.0, 62.34, 3.14159, 0.04213, 0, None, 12)] == [
        "2,484", "5,140,000", "62.3", "3.14", "0.0421", "0", "-", "12"]
    assert fmt_number(0.123, "%") == "12.3%"


def test_point_page_draws_the_measured_power(sweep):
    """The point's power chart: the GPUs' summed watts per step, as read into power.jsonl, beside
    the decode throughput (each read is the mean over the last modeled second, as power.draw is:
    a few reads at clock scale 50 sample the window's average coarsely, so they are only bounded)."""
    run = read_run(sweep_folders(sweep)[1])
    series = chart_blobs(run)["series"]
    fig = over_time(series)["power"]
    watts = next(t for t in fig["data"] if t["name"].startswith("GPU power"))
    decode = next(t for t in fig["data"] if t["name"] == "decode tok/s")
    assert decode["yaxis"] == "y2" and any(v for v in decode["y"] if v)
    reads = {round(s.t // series["step_s"]): sum(r.power_w for r in s.gpus) for s in run.power if s.gpus}
    drawn = {i: w for i, w in enumerate(watts["y"]) if w is not None}
    assert drawn and set(drawn) == set(reads) and all(drawn[i] == pytest.approx(reads[i], abs=0.1) for i in drawn)
    assert all(8 * 77.71 - 1 <= w <= 8 * 700 + 1 for w in drawn.values())  # 8 H200s between idle and TDP
    assert run.result["power"]["valid"] and "dcgm" in fig["layout"]["title"]["text"]  # virtual time: the modeled DCGM series


def test_short_legend_names_drop_asides_then_cut_at_a_word():
    """A legend name holds the labels that differ between curves, at most LEGEND_CHARS long: an
    aside in parentheses goes first (issue #47: 'B200, agentx-sim vllm profile (…'), then the name
    is cut at a word."""
    from agentx.report.frontier_chart import LEGEND_CHARS, short_names

    sim = [{"model": "m", "hardware": hw, "engine": f"agentx-sim {engine} profile (virtual time)", "workload": "w"}
           for hw, engine in (("B200", "vllm"), ("H200", "sglang"))]
    assert short_names(sim) == ["B200, agentx-sim vllm profile", "H200, agentx-sim sglang profile"]
    long = [{"model": "m", "hardware": "GB200 NVL72", "engine": "a very long engine name without any aside", "workload": "w"},
            {"model": "m", "hardware": "H200", "engine": "vllm", "workload": "w"}]
    names = short_names(long)
    assert names == ["GB200 NVL72, a very long engine…", "H200, vllm"] and all(len(n) <= LEGEND_CHARS for n in names)
