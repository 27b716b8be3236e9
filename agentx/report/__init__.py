"""Charts and the HTML report of run folders (SPEC §9).

Chart builders are plain functions from a run's data (`rundata.RunData`) to Plotly figures as
JSON-ready dicts (`{"data": [...], "layout": {...}}`), so the static report and the served
dashboard draw the same charts; `html` renders them with Jinja2 and the vendored plotly.js (static/).
"""
