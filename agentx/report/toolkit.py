"""The report toolkit every page shares: the vendored plotly.js bundles (the smallest holding a page's
trace types), the Jinja2 templates, JSON safe inside a <script> element, the stylesheet and page
helpers every page inlines (static/agentx.css, agentx.js), the favicon, numbers by unit."""

from __future__ import annotations

import hashlib
import json
from functools import cache
from importlib.resources import files
from urllib.parse import quote

import jinja2
import markupsafe


# The vendored plotly.js bundles (static/README.md), smallest first, and the trace types each
# registers. A page loads the smallest holding its charts' types: the WebGL and heatmap code is a
# fifth of the file, which a frontier or dataset page would fetch and compile for nothing.
BUNDLES = {"plotly-agentx-svg.min.js": frozenset({"scatter", "bar"}),
           "plotly-agentx.min.js": frozenset({"scatter", "bar", "heatmap", "scattergl"})}
FULL = "plotly-agentx.min.js"


@cache
def plotly_js(bundle: str = FULL) -> str:
    """A plotly.js bundle with only the trace types agentx draws (the full plotly.min.js takes a
    browser about 3x longer to evaluate, SPEC §9)."""
    return files("agentx.report").joinpath("static", bundle).read_text(encoding="utf-8")


@cache
def plotly_digest(bundle: str = FULL) -> str:
    """A short hash of the bundle: its served URL changes with it, so it can be cached for good."""
    return hashlib.sha256(plotly_js(bundle).encode()).hexdigest()[:12]


def trace_types(node) -> set[str]:
    """The trace types of every figure (a dict with `data` and `layout`) anywhere in `node`."""
    if isinstance(node, list):
        return set().union(*(trace_types(v) for v in node))
    if not isinstance(node, dict):
        return set()
    found = {t.get("type", "scatter") for t in node["data"]} if "data" in node and "layout" in node else set()
    return found.union(*(trace_types(v) for v in node.values()))


def bundle_for(types: set[str]) -> str:
    """The smallest bundle registering every trace type in `types`."""
    return next((name for name, has in BUNDLES.items() if types <= has), FULL)


@cache
def templates() -> jinja2.Environment:
    """The package's Jinja2 templates (autoescaped; compiled once per process)."""
    return jinja2.Environment(loader=jinja2.PackageLoader("agentx.report", "templates"),
                              autoescape=jinja2.select_autoescape(["html", "j2"]), undefined=jinja2.StrictUndefined)


_SCRIPT_ESCAPES = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028",
                                 "\u2029": "\\u2029"})


def script_json(data) -> str:
    """`data` as JSON safe inside a <script> element: no NaN, and no `<`, `>`, `&`, U+2028 or
    U+2029 as themselves (they would close the element, open an HTML comment that swallows the
    page's scripts, or end a line in older JavaScript); escaped, they read back the same."""
    return json.dumps(data, allow_nan=False, separators=(",", ":")).translate(_SCRIPT_ESCAPES)


@cache
def static_text(name: str) -> str:
    """A text file of static/ (the stylesheet, the page helpers)."""
    return files("agentx.report").joinpath("static", name).read_text(encoding="utf-8")


@cache
def static_bytes(*parts: str) -> bytes:
    return files("agentx.report").joinpath("static", *parts).read_bytes()


# the favicon: a frontier curve on a dark tile, as SVG (a data: URL in every page; /favicon.ico served)
FAVICON_SVG = ('<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32"><rect width="32" height="32" rx="6" '
               'fill="#1d2330"/><path d="M5 8 C12 9 18 14 27 26" stroke="#56b4e9" stroke-width="3" fill="none"/>'
               '<circle cx="5" cy="8" r="3" fill="#e69f00"/><circle cx="16" cy="13" r="3" fill="#e69f00"/>'
               '<circle cx="27" cy="26" r="3" fill="#e69f00"/></svg>')


def page_assets() -> dict:
    """What every page template takes: the stylesheet, the page helpers, the favicon."""
    return {"style": markupsafe.Markup(static_text("agentx.css")), "helpers": markupsafe.Markup(static_text("agentx.js")),
            "favicon": "data:image/svg+xml," + quote(FAVICON_SVG)}


def fmt_number(value, unit: str = "") -> str:
    """A figure by its unit, with thousands separators: "2,484", "5,140,000", "62.3", "0.0421";
    percentages (unit "%" for a 0-1 ratio) with one decimal. agentx.js's fmt is the same rule."""
    if value is None or isinstance(value, str):
        return "-" if value is None else value
    if isinstance(value, bool):
        return "yes" if value else "no"
    if unit == "%":
        return f"{value * 100:.1f}%"
    if isinstance(value, int):
        return f"{value:,}"
    a = abs(value)
    if a >= 100 or a == 0:
        return f"{value:,.0f}"
    return f"{value:.1f}" if a >= 10 else f"{value:.2f}" if a >= 1 else f"{value:.3g}"


def plotly_url(bundle: str) -> str:
    """Where a plotly.js bundle is served: its hash in the URL, so a new build gets a new one."""
    return f"/static/plotly-{plotly_digest(bundle)}.min.js"


def charts_page(title: str, figures: dict, nav: list, table: dict | None = None, table_title: str = "",
                stats: dict | None = None, runs: dict | None = None) -> str:
    """A page of charts, with a table of links (`table`: columns, rows of (url, cells)), a trace
    stats table and a table of runs (`runs`: title, columns, rows of (url, cells))."""
    return templates().get_template("charts.html.j2").render(
        title=title, nav=nav, figure_ids=list(figures), table=table, table_title=table_title, stats=stats, runs=runs,
        plotly_src=plotly_url(bundle_for(trace_types(figures))), data_json=script_json({"figures": figures}),
        served=True, **page_assets())


def stored_json(text: str | None):
    """A stored JSON text decoded; None when there is none or the row is corrupt (not JSON)."""
    try:
        return json.loads(text) if text else None
    except (ValueError, TypeError, RecursionError):
        return None
