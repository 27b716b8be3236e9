"""The calibration report as text tables (rich) and as a standalone HTML page."""

from __future__ import annotations

from html import escape

from agentx.virtual.calibrate import ITL_BAND, SHARE_NAMES, TOK_S_BAND, TTFT_BAND, Outcome, within


def _f(v, fmt="{:,.0f}") -> str:
    return "-" if v is None else fmt.format(v)


def row_cells(o: Outcome) -> list[str]:
    mark = lambda ok: "ok" if ok else "off"  # noqa: E731
    return [o.share, o.id, o.group, o.parallelism, o.scenario, str(o.concurrency),
            _f(o.published_tok_s_per_gpu), _f(o.tok_s_per_gpu), _f(o.ratio, "{:.2f}"),
            mark(within(o.ratio, TOK_S_BAND)),
            f"{_f(o.published_ttft_ms)} / {_f(o.ttft_ms)}", _f(o.ttft_ratio, "{:.2f}"),
            f"{_f(o.published_tpot_ms, '{:.1f}')} / {_f(o.itl_ms, '{:.1f}')}", _f(o.itl_ratio, "{:.2f}"),
            mark(within(o.itl_ratio, ITL_BAND))]


ROW_HEAD = ["share", "row", "hardware x engine", "parallelism", "ISL:OSL", "conc", "pub tok/s/GPU", "sim tok/s/GPU",
            "sim/pub", "±15 %", "TTFT p50 ms pub / sim", "sim/pub", "TPOT p50 ms pub / sim ITL", "sim/pub", "±20 %"]
GROUP_HEAD = ["share", "rows", "tok/s within ±15 %", "ITL within ±20 %", "both", "TTFT within ±50 %",
              "geo-mean tok/s ratio", "geo-mean ITL ratio", "geo-mean TTFT ratio"]


def group_cells(name: str, g: dict) -> list[str]:
    pct = lambda v: _f(None if v is None else 100 * v, "{:.0f} %")  # noqa: E731
    return [name, str(g["rows"]), pct(g["within_tok_s"]), pct(g["within_itl"]), pct(g["within_both"]),
            f"{pct(g['within_ttft'])} of {g['ttft_rows']}", _f(g["geomean_tok_s_ratio"], "{:.2f}"),
            _f(g["geomean_itl_ratio"], "{:.2f}"), _f(g["geomean_ttft_ratio"], "{:.2f}")]


def summary_rows(report: dict, per_group: bool = False) -> list[list[str]]:
    """Per share: all rows, then MoE and dense apart (and per hardware x engine)."""
    out = []
    for share, s in report["summary"].items():
        out.append(group_cells(share, s["total"]))
        out += [group_cells(f"  {share} {kind}", s[kind]) for kind in ("moe", "dense") if s[kind]["rows"]]
        if per_group:
            out += [group_cells(f"  {share} {name}", g) for name, g in s["groups"].items()]
    return out


def headline(report: dict) -> str:
    """One line per share: what the issue's targets read."""
    lines = []
    for share, s in report["summary"].items():
        t, moe = s["total"], s["moe"]
        lines.append(f"{share}: {t['rows']} rows, {t['within_tok_s']:.0%} within ±{TOK_S_BAND:.0%} tok/s per GPU, "
                     f"{t['within_itl']:.0%} within ±{ITL_BAND:.0%} ITL, {t['within_both']:.0%} both"
                     + (f"; MoE {moe['rows']} rows, {moe['within_both']:.0%} both" if moe["rows"] else "")
                     + (f"; TTFT {t['within_ttft']:.0%} of {t['ttft_rows']} within ±{TTFT_BAND:.0%}" if t["ttft_rows"] else ""))
    return "\n".join(lines)


def tables(report: dict, outcomes: list[Outcome]) -> list:
    from rich.table import Table

    from rich import box

    rows = Table(*ROW_HEAD, title="Calibration rows", box=box.MARKDOWN)
    rows.columns[1].no_wrap = True
    rows.columns[1].min_width = max((len(o.id) for o in outcomes), default=10)
    for o in outcomes:
        rows.add_row(*row_cells(o))
    shares = Table(*GROUP_HEAD, title="Shares (" + "; ".join(f"{k}: {SHARE_NAMES[k]}" for k in report["shares"])
                   + f"; held-out rule: {report['held_out_rule']})", box=box.MARKDOWN)
    for cells in summary_rows(report):
        shares.add_row(*cells)
    return [rows, shares]


def page(report: dict, outcomes: list[Outcome]) -> str:
    def table(head, body) -> str:
        th = "".join(f"<th>{escape(h)}</th>" for h in head)
        trs = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in cells) + "</tr>" for cells in body)
        return f"<table><thead><tr>{th}</tr></thead><tbody>{trs}</tbody></table>"

    groups = summary_rows(report, per_group=True)
    skipped = "".join(f"<li>{escape(s['id'])}: {escape(s['why'])}</li>" for s in report["not_modeled"])
    sources = "".join(f"<li>{escape(r['id'])}: {escape(r['source']['repo'])} {escape(r['source']['path'])} @ "
                      f"{escape(r['source']['commit'][:12])}; {escape(r['profile'])}</li>" for r in report["rows"])
    return ("<!doctype html><html><head><meta charset='utf-8'><title>agentx sim calibrate</title><style>"
            "body{font-family:system-ui,sans-serif;margin:2em}table{border-collapse:collapse;margin:1em 0}"
            "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}td:first-child{text-align:left}"
            "</style></head><body><h1>Simulator calibration against published points</h1>"
            f"<p>Shares: {escape('; '.join(f'{k}: {v}' for k, v in report['shares'].items()))}; held-out rule: "
            f"{escape(report['held_out_rule'])}. Bands: tok/s per GPU ±{TOK_S_BAND:.0%}, "
            f"ITL p50 ±{ITL_BAND:.0%}, TTFT p50 ±{TTFT_BAND:.0%}.</p><h2>Shares (MoE and dense apart, per hardware x engine)</h2>{table(GROUP_HEAD, groups)}"
            f"<h2>Rows</h2>{table(ROW_HEAD, [row_cells(o) for o in outcomes])}"
            f"<h2>Listed, not modeled</h2><ul>{skipped}</ul><h2>Sources and fits</h2><ul>{sources}</ul>"
            "</body></html>")
