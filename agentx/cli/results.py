"""The results commands: `agentx db ...`, `agentx frontier`, `agentx serve`, `agentx sweep`.
`register(app)` adds them to the main `agentx` command."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from agentx.cli.common import Interrupted, console, err_console
from agentx.metrics.confidence import ANSWER_SPREAD_LIMIT

MAX_GPUS = 100_000  # runschema.MAX_GPUS (not imported here: the CLI loads fast)

db_app = typer.Typer(no_args_is_help=True, help="The results database: import, export, inspect.")
DB_HELP = "Results database: a SQLAlchemy URL (postgresql://..., sqlite:///...) or a SQLite file path " \
          "(default: results.db in the user's data directory)."


def _say(message: str) -> None:
    err_console.print(message, highlight=False, soft_wrap=True)


def _stored(value) -> str:
    """A stored string as printed: terminal control characters (ANSI, OSC 8, CR) escaped, rich
    markup inert; "-" for none."""
    from rich.markup import escape

    from agentx.userfiles import shown

    return "-" if value is None or value == "" else escape(shown(str(value)))


def _say_plain(message: str) -> None:
    """A line on stderr printed as it is (no rich markup read in it)."""
    err_console.print(message, highlight=False, markup=False, soft_wrap=True)


# filters of `db points` and `frontier`: exact matches on the deployment's labels and the dataset
OPT_MODEL = typer.Option(None, "--model", help="Only points of this model (exact name).")
OPT_HARDWARE = typer.Option(None, "--hardware", help="Only points on this hardware (e.g. H200).")
OPT_ENGINE = typer.Option(None, "--engine", help="Only points of this engine label (e.g. vllm-0.11).")
OPT_DATASET = typer.Option(None, "--dataset", help="Only points replaying this dataset (as `db points` names it).")


OPT_DB_INIT = typer.Option(False, "--db-init", help="Add agentx's tables to a --db that holds other programs' "
                           "tables (refused without it: it is likely not the file meant).")


def _engine(db: Optional[str], init: bool = False):
    from agentx.results.db import connect

    return connect(db, _say, init=init)


@db_app.command("import")
def db_import_cmd(
    paths: list[Path] = typer.Argument(..., help="Run folders, or folders holding run folders (a sweep)."),
    db: Optional[str] = typer.Option(None, "--db", help=DB_HELP), db_init: bool = OPT_DB_INIT,
):
    """Store run folders made by `agentx bench` / `demo` / `sweep` as points: each folder whole or
    not at all; a summary line ends a batch, which exits 2 if any folder was skipped or refused."""
    from agentx.errors import AgentxError
    from agentx.results.importer import Refused, import_each

    outcomes, said = [], 0
    try:
        for done in import_each(_engine(db, db_init), paths):
            outcomes.append(done)
            if not (len(outcomes) == 1 and isinstance(done, Refused)):  # a lone refusal is the error line
                said = _say_outcomes(outcomes, said)
    except KeyboardInterrupt:  # each folder is one transaction: the one under way is rolled back
        _say_outcomes(outcomes, said)
        raise Interrupted(f"interrupted (Ctrl-C): {_import_summary(outcomes)}; the folder being read was "
                          "not stored") from None
    if len(outcomes) == 1 and isinstance(outcomes[0], Refused):
        raise AgentxError(f"{outcomes[0].reason} (nothing stored)")
    _say_outcomes(outcomes, said)
    if any(not _stored_as_is(o) for o in outcomes):
        raise AgentxError(_import_summary(outcomes))
    if len(outcomes) > 1:
        _say_plain(_import_summary(outcomes))


def _say_outcomes(outcomes: list, said: int) -> int:
    """Say the outcomes from index `said` on, as each folder ends (a Ctrl-C after the batch cannot
    lose the lines of points it stored); a Ctrl-C waits while they are said, so each stored point's
    line is said exactly once. Returns how many are said."""
    import signal

    mask = getattr(signal, "pthread_sigmask", None)  # POSIX; elsewhere a Ctrl-C may land mid-line
    blocked = mask(signal.SIG_BLOCK, {signal.SIGINT}) if mask else None
    try:
        for done in outcomes[said:]:
            _say_outcome(done)
        return len(outcomes)
    finally:
        if mask:
            mask(signal.SIG_SETMASK, blocked)


def _stored_as_is(done) -> bool:
    from agentx.results.importer import Imported

    return isinstance(done, Imported) and done.differs is None


def _say_outcome(done) -> None:
    """A folder's line: stored, already stored (and whether the folder differs), skipped, refused."""
    from agentx.results.importer import Refused, Skipped
    from agentx.userfiles import shown

    if isinstance(done, Refused):
        _say(f"{shown(done.path)}: refused (nothing stored): {shown(done.reason)}")
    elif isinstance(done, Skipped):  # an incomplete run
        _say_plain(f"skipped {shown(done.path)}: incomplete, {done.reason}")
    elif done.differs:
        _say_plain(f"{shown(done.path)}: already stored as point {done.point_id}, but the folder differs from the "
                   f"stored one ({done.differs}); the stored point is kept (the run id is the same)")
    else:
        state = "stored as" if done.new else "already stored as"
        console.print(f"{shown(done.path)}: {state} point {done.point_id}", highlight=False)


def _import_summary(outcomes: list) -> str:
    """`imported N (K new), skipped M: reasons` of a batch of folders."""
    from collections import Counter

    from agentx.results.importer import Imported, Refused, Skipped

    kept = [o for o in outcomes if _stored_as_is(o)]
    reasons = Counter("refused" if isinstance(o, Refused) else "incomplete" if isinstance(o, Skipped)
                      else "differs from the stored point" for o in outcomes if not _stored_as_is(o))
    new = sum(isinstance(o, Imported) and o.new for o in kept)
    line = f"imported {len(kept)} ({new} new, {len(kept) - new} already stored), skipped {sum(reasons.values())}"
    return line + (": " + ", ".join(f"{n} {why}" for why, n in reasons.items()) if reasons else "")


@db_app.command("points")
def db_points_cmd(
    db: Optional[str] = typer.Option(None, "--db", help=DB_HELP),
    model: Optional[str] = OPT_MODEL, hardware: Optional[str] = OPT_HARDWARE,
    engine: Optional[str] = OPT_ENGINE, dataset: Optional[str] = OPT_DATASET,
):
    """List the stored points (ids for `export-inferencex` and the API)."""
    from sqlalchemy import select

    from agentx.results.query import Filters, filtered
    from agentx.results.schema import deployments, points

    q = filtered(select(points.c.id, points.c.status, points.c.source, deployments.c.model, deployments.c.hardware,
                        deployments.c.engine, points.c.concurrency, points.c.tput_per_gpu,
                        points.c.p90_e2e_norm_intvty, points.c.valid, points.c.started_at)
                 .join(deployments, points.c.deployment_id == deployments.c.id),
                 Filters(model=model, hardware=hardware, engine=engine, dataset=dataset))
    from agentx.results.query import unsound
    from agentx.userfiles import shown

    with _engine(db).connect() as conn:
        rows = [dict(r._mapping) for r in conn.execute(q.order_by(points.c.id))]
    fmt = lambda v, f: "-" if v is None else f.format(v)  # noqa: E731
    text = lambda v: "-" if v is None or v == "" else shown(str(v))  # noqa: E731
    print(f"{'point':>6} {'status':<7} {'source':<7} {'hardware':<9} {'engine':<16} {'lanes':>5} {'tok/s/GPU':>10} "
          f"{'E2E-norm p90':>12} {'valid':<6} {'started':<17} model")
    skipped = 0
    for r in rows:
        if reason := unsound(r):
            _say_plain(f"skipped point {r['id']}: its stored row is corrupt ({shown(reason)})")
            skipped += 1
            continue
        print(f"{r['id']:>6} {text(r['status']):<7} {text(r['source']):<7} {text(r['hardware']):<9} "
              f"{text(r['engine']):<16} {fmt(r['concurrency'], '{}'):>5} {fmt(r['tput_per_gpu'], '{:,.1f}'):>10} "
              f"{fmt(r['p90_e2e_norm_intvty'], '{:,.2f}'):>12} {fmt(r['valid'], '{}'):<6} "
              f"{text(r['started_at'])[:16]:<17} {text(r['model'])}")
    if skipped:
        from agentx.errors import AgentxError

        raise AgentxError(f"{skipped} of {len(rows)} stored points skipped (corrupt rows), the others listed")


@db_app.command("import-aiperf")
def db_import_aiperf_cmd(
    artifact_dir: Path = typer.Argument(..., help="An AIPerf artifact folder (profile_export.jsonl, "
                                        "profile_export_aiperf.json, server_metrics_export.json)."),
    hardware: Optional[str] = typer.Option(None, "--hardware", help="GPU kind of the deployment (H100, H200, B200, ...)."),
    gpus: Optional[int] = typer.Option(None, "--gpus", min=1, max=MAX_GPUS, help="GPUs of the deployment (per-GPU "
                                       "and cost figures)."),
    engine: Optional[str] = typer.Option(None, "--engine", help="Engine label (e.g. vllm-0.11)."),
    precision: Optional[str] = typer.Option(None, "--precision", help="Precision label (bf16, fp8, fp4, ...)."),
    db: Optional[str] = typer.Option(None, "--db", help=DB_HELP), db_init: bool = OPT_DB_INIT,
):
    """Store an AIPerf run as a point (AIPerf does not know the deployment: label it here)."""
    from agentx.results.aiperf import import_aiperf

    labels = {"hardware": hardware, "gpus": gpus, "engine": engine, "precision": precision}
    done = import_aiperf(_engine(db, db_init), artifact_dir, labels)
    console.print(f"{artifact_dir}: {'stored as' if done.new else 'already stored as'} point {done.point_id}",
                  highlight=False)


@db_app.command("export-inferencex")
def db_export_cmd(
    point: int = typer.Argument(..., help="A point id.", min=1, max=2**31 - 1),
    db: Optional[str] = typer.Option(None, "--db", help=DB_HELP),
):
    """Print a point as InferenceX's flat AgentX metrics row (JSON)."""
    import json

    from agentx.results.inferencex import export_row

    console.print_json(json.dumps(export_row(_engine(db), point)))


def frontier_cmd(
    db: Optional[str] = typer.Option(None, "--db", help=DB_HELP),
    x: str = typer.Option("p90_e2e_norm_intvty", "--x", help="p50_intvty, p90_intvty, p50_e2e_norm_intvty, "
                          "p90_e2e_norm_intvty, or (lower is better) p90_ttft, p50_e2el, p90_e2el."),
    y: str = typer.Option("tput_per_gpu", "--y", help="tput_per_gpu, output_tput_per_gpu, input_tput_per_gpu, "
                          "tok_per_usd_{hyperscaler,neocloud,rental_3y}, tok_s_per_mw (the cost table's kW), "
                          "measured_tok_s_per_mw, or (lower is better) joules_per_output_token, "
                          "joules_per_total_token (measured power, bench --power), "
                          "usd_per_m_tok_{hyperscaler,neocloud,rental_3y}."),
    model: Optional[str] = OPT_MODEL, hardware: Optional[str] = OPT_HARDWARE,
    engine: Optional[str] = OPT_ENGINE, dataset: Optional[str] = OPT_DATASET,
    overall: bool = typer.Option(False, "--all", help="One frontier per workload over every deployment instead of "
                                 "one per curve."),
    at: Optional[float] = typer.Option(None, "--at", help="Also interpolate y at this x on each curve."),
    spread_limit: float = typer.Option(ANSWER_SPREAD_LIMIT, "--spread-limit", min=0, help="Widest 95 % interval of "
                                       "TTFT p50 / p90 (a share of the figure) a point may have to answer; wider: "
                                       "low confidence, listed apart (SPEC 3). 0: no bound."),
):
    """Pareto frontiers of the stored points (SPEC §5): one per (model, hardware, engine, workload)."""
    from rich.table import Table

    from agentx.results.frontier import CURVE, at_x, frontier, load_points
    from agentx.results.query import Filters
    from agentx.userfiles import shown

    skipped = []
    rows = load_points(_engine(db), Filters(model=model, hardware=hardware, engine=engine, dataset=dataset), x, y,
                       skipped)
    for bad in skipped:
        _say_plain(f"skipped point {bad['id']}: its stored row is corrupt ({shown(bad['reason'])})")
    curves = frontier(rows, x, y, per_curve=not overall, spread_limit=spread_limit)
    if not curves:
        console.print("no stored points match")
        return
    for curve in curves:
        title = "all deployments" if overall else " / ".join(_stored(curve.key[k]) for k in CURVE if k != "workload" and curve.key[k])
        t = Table(title=f"{title}: {y} against {x}, workload {_stored(curve.key['workload'] or 'unnamed')}",
                  title_justify="left", show_edge=False)
        for col in ("point", "lanes", x, y, "parallelism", "spec decoding", "KV offload", "valid"):
            t.add_column(col, justify="right")
        for r in curve.points:
            t.add_row(str(r["id"]), str(r["concurrency"]), f"{r[x]:,.3f}", f"{r[y]:,.1f}", _stored(r["parallelism"]),
                      _stored(r["spec_decoding"]), _stored(r["kv_offload"]), "yes" if r["valid"] else "no")
        console.print(t)
        for r in curve.invalid:
            console.print(f"  off the curve: point {r['id']} (c{r['concurrency']}) NOT VALID: "
                          f"{'; '.join(_stored(v) for v in r['reasons'])}", highlight=False)
        for r in curve.low_confidence:
            console.print(f"  [dim]low confidence, no answer: point {r['id']} (c{r['concurrency']}): "
                          f"{r['confidence']['text']}[/dim]", highlight=False)
        if at is not None:
            found = at_x(curve, x, y, at)
            if found is None:
                console.print(f"  {y} at {x} = {at:g}: no point reaches it", highlight=False)
                continue
            lanes = " and ".join(f"c{n}" for n in found["concurrency"])
            how = f"interpolated between {lanes}" if found["interpolated"] else f"measured at {lanes}"
            console.print(f"  {y} at {x} = {at:g}: {found['value']:,.1f} ({how} of deployment {found['deployment_id']}: "
                          f"{_stored(found['configuration'])})", highlight=False)


def serve_cmd(
    db: Optional[str] = typer.Option(None, "--db", help=DB_HELP), db_init: bool = OPT_DB_INIT,
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on (a non-loopback one needs --token "
                             "or --read-only)."),
    port: int = typer.Option(8400, "--port", min=0, max=65535, help="Port to listen on (0: a free one, printed)."),
    token: Optional[str] = typer.Option(None, "--token", help="Bearer token that the write endpoint requires; "
                                        "without it uploads are refused (and a non-loopback host refuses to start)."),
    read_only: bool = typer.Option(False, "--read-only", help="No write endpoint."),
    upload_dir: Optional[Path] = typer.Option(None, "--upload-dir", help="Where uploaded runs are kept "
                                              "(default: uploads/ in the user's data directory)."),
    request_timeout_s: float = typer.Option(20.0, "--request-timeout-s", min=1.0, max=3600.0,
                                            help="Seconds a client has to send a request's head and body "
                                            "(an upload included); then the connection is closed."),
    workers: int = typer.Option(8, "--workers", min=1, max=256, help="Threads that answer requests (and "
                                "database connections); more requests wait in line."),
    max_upload_mb: int = typer.Option(1024, "--max-upload-mb", min=1, max=64 * 1024,
                                      help="Largest upload body (MiB)."),
):
    """The results REST API (OpenAPI at /openapi.json), served by uvicorn."""
    from agentx.report.pages import add_pages
    from agentx.results.api import create_app, check_exposure
    from agentx.results.db import connect
    from agentx.results.httpserver import ServeLimits, serve

    check_exposure(host, token, read_only)
    limits = ServeLimits(request_timeout_s=request_timeout_s, workers=workers, max_upload_bytes=max_upload_mb << 20)
    engine = connect(db, _say, pool_size=limits.workers, init=db_init)
    app = create_app(engine, token=token, writable=not read_only, upload_dir=upload_dir, workers=limits.workers,
                     max_upload_bytes=limits.max_upload_bytes)
    add_pages(app, engine)
    from agentx.serving import bind_socket

    sock = bind_socket(host, port)  # a busy port: one line, before "listening" is printed
    port = sock.getsockname()[1]
    console.print(f"agentx results API listening on http://{host}:{port} (OpenAPI: /openapi.json)", highlight=False)
    serve(app, host, port, limits, sock)


def sweep_cmd(
    recipe: Path = typer.Argument(..., help="A sweep recipe (YAML)."),
    db: Optional[str] = typer.Option(None, "--db", help=DB_HELP), db_init: bool = OPT_DB_INIT,
    out: Optional[Path] = typer.Option(None, "--out", help="Folder of the sweep's runs (default "
                                       "runs/sweep-NAME-FINGERPRINT)."),
):
    """Run a sweep recipe: each deployment's points, stored as they finish; re-running resumes.
    At the end: a table of every point and report.html in the sweep's folder."""
    from agentx.cli.bench import _progress, print_sweep
    from agentx.report.rundata import complete_runs
    from agentx.results.recipe_sweep import run_sweep
    from agentx.virtual.twin import virtual_twin

    with _progress() as tick:
        folder, _ = run_sweep(recipe, _engine(db, db_init), out, say=lambda m: console.print(m, highlight=False),
                              on_tick=tick, twin=virtual_twin)
    if complete_runs(folder):
        print_sweep(folder)
    else:
        console.print(f"no point of the sweep completed: no table or report ({folder})", highlight=False)


def register(app: typer.Typer) -> None:
    app.add_typer(db_app, name="db")
    app.command("frontier")(frontier_cmd)
    app.command("serve")(serve_cmd)
    app.command("sweep")(sweep_cmd)
