"""The calibration report as text tables (rich) and as a standalone HTML page."""

from __future__ import annotations

from html import escape

from agentx.virtual.calibrate import ITL_BAND, TOK_S_BAND, Outcome, within


def _f(v, fmt="{:,.0f}") -> str:
    return "-" if v is None else fmt.format(v)


def row_cells(o: Outcome) -> list[str]:
    mark = lambda ok: "ok" if ok else "off"  # noqa: E731
    return [o.id, o.group, o.parallelism, o.scenario, str(o.concurrency),
            _f(o.published_tok_s_per_gpu), _f(o.tok_s_per_gpu), _f(o.ratio, "{:.2f}"),
            mark(within(o.ratio, TOK_S_BAND)),
            f"{_f(o.published_ttft_ms)} / {_f(o.ttft_ms)}",
            f"{_f(o.published_tpot_ms, '{:.1f}')} / {_f(o.itl_ms, '{:.1f}')}", _f(o.itl_ratio, "{:.2f}"),
            mark(within(o.itl_ratio, ITL_BAND))]


ROW_HEAD = ["row", "hardware x engine", "parallelism", "ISL:OSL", "conc", "pub tok/s/GPU", "sim tok/s/GPU",
            "sim/pub", "±15 %", "TTFT p50 ms pub / sim", "TPOT p50 ms pub / sim ITL", "sim/pub", "±20 %"]
GROUP_HEAD = ["hardware x engine", "rows", "tok/s within ±15 %", "ITL within ±20 %", "both",
              "geo-mean tok/s ratio", "geo-mean ITL ratio"]


def group_cells(name: str, g: dict) -> list[str]:
    pct = lambda v: _f(None if v is None else 100 * v, "{:.0f} %")  # noqa: E731
    return [name, str(g["rows"]), pct(g["within_tok_s"]), pct(g["within_itl"]), pct(g["within_both"]),
            _f(g["geomean_tok_s_ratio"], "{:.2f}"), _f(g["geomean_itl_ratio"], "{:.2f}")]


def tables(report: dict, outcomes: list[Outcome]) -> list:
    from rich.table import Table

    from rich import box

    rows = Table(*ROW_HEAD, title=f"Calibration rows ({report['profiles']})", box=box.MARKDOWN)
    rows.columns[0].no_wrap = True
    rows.columns[0].min_width = max((len(o.id) for o in outcomes), default=10)
    for o in outcomes:
        rows.add_row(*row_cells(o))
    groups = Table(*GROUP_HEAD, title="Per hardware x engine", box=box.MARKDOWN)
    for name, g in report["summary"]["groups"].items():
        groups.add_row(*group_cells(name, g))
    groups.add_row(*group_cells("all", report["summary"]["total"]))
    return [rows, groups]


def page(report: dict, outcomes: list[Outcome]) -> str:
    def table(head, body) -> str:
        th = "".join(f"<th>{escape(h)}</th>" for h in head)
        trs = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in cells) + "</tr>" for cells in body)
        return f"<table><thead><tr>{th}</tr></thead><tbody>{trs}</tbody></table>"

    groups = [group_cells(n, g) for n, g in report["summary"]["groups"].items()]
    groups.append(group_cells("all", report["summary"]["total"]))
    skipped = "".join(f"<li>{escape(s['id'])}: {escape(s['why'])}</li>" for s in report["not_modeled"])
    sources = "".join(f"<li>{escape(r['id'])}: {escape(r['source']['repo'])} {escape(r['source']['path'])} @ "
                      f"{escape(r['source']['commit'][:12])}; {escape(r['profile'])}</li>" for r in report["rows"])
    return ("<!doctype html><html><head><meta charset='utf-8'><title>agentx sim calibrate</title><style>"
            "body{font-family:system-ui,sans-serif;margin:2em}table{border-collapse:collapse;margin:1em 0}"
            "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}td:first-child{text-align:left}"
            "</style></head><body><h1>Simulator calibration against published points</h1>"
            f"<p>Profiles: {escape(report['profiles'])}. Bands: tok/s per GPU ±{TOK_S_BAND:.0%}, "
            f"ITL p50 ±{ITL_BAND:.0%}.</p><h2>Per hardware x engine</h2>{table(GROUP_HEAD, groups)}"
            f"<h2>Rows</h2>{table(ROW_HEAD, [row_cells(o) for o in outcomes])}"
            f"<h2>Listed, not modeled</h2><ul>{skipped}</ul><h2>Sources and fits</h2><ul>{sources}</ul>"
            "</body></html>")
