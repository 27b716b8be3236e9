"""The results REST API (FastAPI; SPEC §8). Read endpoints return database rows; chart data comes
from the per-point blobs precomputed at import, sent gzip-compressed as stored. The one write
endpoint (upload a run folder's files) needs the bearer token the server was started with."""

from __future__ import annotations

import gzip
import hmac
from contextlib import asynccontextmanager
import ipaddress
import json
import shutil
import tempfile
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Annotated, Literal

import anyio.to_thread
import msgspec
from fastapi import Depends, FastAPI, File, HTTPException, Query, Request, UploadFile
from fastapi import Path as PathParam
from fastapi.middleware.gzip import GZipMiddleware
from fastapi.responses import Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.routing import Match
from sqlalchemy import select
from sqlalchemy.engine import Engine

from agentx.errors import AgentxError
from agentx.metrics.confidence import ANSWER_SPREAD_LIMIT
from agentx.metrics.trust import diagnosis, provenance
from agentx.results import frontier as fr
from agentx.results.inferencex import export_row
from agentx.results.query import KINDS, Filters, filtered
from agentx.results.schema import (DEPLOYMENT_LABELS, METRIC_COLUMNS, conversations, datasets, deployments,
                                   point_blobs, points, sweeps)
from agentx.results.points import unpack

PREFIX = "/api/v1"
UPLOAD_PATH = PREFIX + "/runs"
UPLOAD_FILES = ("run.json", "result.json", "records.jsonl", "records.parquet", "server_metrics.jsonl", "power.jsonl",
                "trees.jsonl", "dataset.json")
MAX_ID = 2**31 - 1

ItemId = Annotated[int, PathParam(ge=1, le=MAX_ID)]
Label = Annotated[str | None, Query(max_length=300, pattern=r"^[^\x00]*$")]
When = Annotated[datetime | date | None, Query(description="ISO 8601 date or time (UTC)")]
XMetric = Literal[tuple(fr.X_METRICS)]  # type: ignore[valid-type]
YMetric = Literal[fr.Y_METRICS]  # type: ignore[valid-type]
# the answer bound (SPEC section 3, "Settled: confidence"): 0 turns it off
SpreadLimit = Annotated[float, Query(ge=0, le=100, allow_inf_nan=False)]
Credentials = Annotated[HTTPAuthorizationCredentials | None, Depends(HTTPBearer(auto_error=False))]

POINT_COLUMNS = [points.c[name] for name in ("id", "run_id", "deployment_id", "sweep_id", "dataset_id", "source",
                                             "status", "failure", "concurrency", "started_at", "valid", "simulated",
                                             "requests_ok", "requests_failed", *METRIC_COLUMNS)]


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_exposure(host: str, token: str | None, read_only: bool) -> None:
    if not read_only and not token and not is_loopback(host):
        raise AgentxError(f"--host {host}: a write API on a non-loopback address needs --token (or --read-only)")


def _json(obj, status: int = 200) -> Response:
    return Response(msgspec.json.encode(obj), status_code=status, media_type="application/json")


def _filters(model: Label = None, hardware: Label = None, engine: Label = None, dataset: Label = None,
             since: When = None, until: When = None, engine_version: Label = None, precision: Label = None,
             parallelism: Label = None, spec_decoding: Label = None, kv_offload: Label = None, router: Label = None,
             kind: Literal[KINDS] | None = None) -> Filters:  # type: ignore[valid-type]
    return Filters(model, hardware, engine, dataset, _utc(since), _utc(until), engine_version, precision, parallelism,
                   spec_decoding, kv_offload, router, kind)


def _utc(when: datetime | date | None) -> str | None:
    """As stored (`started_at` is ISO 8601 UTC), so that strings compare as times."""
    if isinstance(when, datetime) and when.tzinfo is not None:
        try:
            when = when.astimezone(timezone.utc)
        except OverflowError:  # an offset that moves the time past year 1 or 9999
            raise HTTPException(422, f"since / until: out of range: {when.isoformat()}") from None
    return when.isoformat() if when is not None else None


def create_app(engine: Engine, token: str | None = None, writable: bool = True,
               upload_dir: Path | None = None, workers: int | None = None,
               max_upload_bytes: int = 1 << 30) -> FastAPI:
    """`workers`: threads that run the route handlers (anyio's default, 40, when None)."""
    @asynccontextmanager
    async def lifespan(_app):
        if workers:
            anyio.to_thread.current_default_thread_limiter().total_tokens = workers
        yield

    # /docs is the dashboard's (agentx/report/pages.py: a vendored Swagger UI, offline), not one from a CDN
    app = FastAPI(title="agentx results", version="1", description="Points, frontiers and chart data of agentx runs.",
                  lifespan=lifespan, docs_url=None, redoc_url=None)
    app.add_middleware(GZipMiddleware, minimum_size=1000, compresslevel=4)
    app.router.redirect_slashes = False  # Starlette's writes the Host header into Location: SlashRedirect's does not
    app.add_middleware(SlashRedirect, router=app.router)
    if writable:
        app.add_middleware(RequestGuard, token=token, max_upload_bytes=max_upload_bytes)

    db = _Reads(engine)
    _label_routes(app, db)
    _point_routes(app, db)
    _frontier_routes(app, db)
    _dataset_routes(app, db)
    if writable:
        @app.post(UPLOAD_PATH, status_code=201, summary="Upload a run folder's files for import (bearer token)",
                  responses={401: {"description": "No valid bearer token (checked before the body is read)"},
                             411: {"description": "No Content-Length"}, 413: {"description": "Body too large"},
                             503: {"description": "The database is locked by another program (Retry-After)"},
                             422: {"description": "Not a valid run folder (the one-line reason)"}})
        def upload_run(files: Annotated[list[UploadFile], File()],
                       credentials: Credentials = None):
            _authorize(token, credentials)
            return _json(_import_upload(engine, files, upload_dir), 201)

    return app


class _Reads:
    """The queries the routes share, on one database."""

    def __init__(self, engine: Engine):
        self.engine = engine

    def rows(self, q) -> list[dict]:
        with self.engine.connect() as conn:
            return [dict(r._mapping) for r in conn.execute(q)]

    def one(self, q, what: str) -> dict:
        found = self.rows(q)
        if not found:
            raise HTTPException(404, f"{what} not found")
        return found[0]

    def blob(self, request: Request, point_id: int, kind: str) -> Response:
        with self.engine.connect() as conn:
            data = conn.execute(select(point_blobs.c.data).where(
                (point_blobs.c.point_id == point_id) & (point_blobs.c.kind == kind))).scalar()
        if data is None:
            raise HTTPException(404, f"no {kind} for point {point_id}")
        if "gzip" in request.headers.get("accept-encoding", ""):
            return Response(data, media_type="application/json", headers={"Content-Encoding": "gzip"})
        try:
            return Response(msgspec.json.encode(unpack(data)), media_type="application/json")
        except (OSError, EOFError, ValueError, msgspec.DecodeError):  # a corrupt blob another program wrote
            raise HTTPException(422, f"point {point_id}: its stored {kind} are corrupt (import it again)") from None


def _label_routes(app: FastAPI, db: _Reads) -> None:
    """Deployments and sweeps."""

    @app.get(PREFIX + "/deployments", summary="Deployments (the natural key of labels)")
    def list_deployments():
        return _json(db.rows(select(deployments).order_by(deployments.c.id)))

    @app.get(PREFIX + "/sweeps", summary="Sweeps (recipe, fingerprint, status, times)")
    def list_sweeps():
        return _json(db.rows(select(sweeps).order_by(sweeps.c.id)))


def _point_routes(app: FastAPI, db: _Reads) -> None:
    """Points: their rows, details and chart data."""

    @app.get(PREFIX + "/points", summary="Points with their labels and scalar metrics")
    def list_points(f: Annotated[Filters, Depends(_filters)], status: Literal["ok", "failed"] | None = None,
                    limit: Annotated[int, Query(ge=1, le=10000)] = 1000, offset: Annotated[int, Query(ge=0, le=MAX_ID)] = 0):
        q = filtered(select(*POINT_COLUMNS, *[deployments.c[k] for k in DEPLOYMENT_LABELS])
                     .join(deployments, points.c.deployment_id == deployments.c.id), f)
        if status is not None:
            q = q.where(points.c.status == status)
        return _json(db.rows(q.order_by(points.c.id).limit(limit).offset(offset)))

    @app.get(PREFIX + "/points/{point_id}", summary="One point: summary (result point), series and histograms")
    def point_detail(point_id: ItemId):
        row = db.one(select(*POINT_COLUMNS, points.c.run_dir).where(points.c.id == point_id), f"point {point_id}")
        # stored JSON is spliced in as it is (no decoding and encoding again of a large point's series)
        with db.engine.connect() as conn:
            texts = conn.execute(select(points.c.settings, points.c.result).where(points.c.id == point_id)).one()
            blobs = dict(conn.execute(select(point_blobs.c.kind, point_blobs.c.data).where(
                (point_blobs.c.point_id == point_id) & point_blobs.c.kind.in_(("series", "histograms")))).all())
        parts = [msgspec.json.encode(row)[:-1]]
        for key, text in (("settings", texts.settings), ("result", texts.result)):
            parts.append(b',"%s":%s' % (key.encode(), strict_json(text)))
        for kind in ("series", "histograms"):
            parts.append(b',"%s":%s' % (kind.encode(), gzip.decompress(blobs[kind]) if kind in blobs else b"null"))
        parts.append(b',"trust":' + msgspec.json.encode(_trust(texts.result, point_id)))
        return Response(b"".join(parts) + b"}", media_type="application/json")

    @app.get(PREFIX + "/points/{point_id}/result.json", summary="The point's result.json (SPEC section 4), "
             "as a download")
    def point_result(point_id: ItemId):
        text = db.one(select(points.c.result).where(points.c.id == point_id), f"point {point_id}")["result"]
        return Response(strict_json(text), media_type="application/json",
                        headers={"Content-Disposition": f'attachment; filename="point-{point_id}-result.json"'})

    @app.get(PREFIX + "/points/{point_id}/series", summary="Series on the 1 s grid (compact arrays)")
    def point_series(request: Request, point_id: ItemId):
        return db.blob(request, point_id, "series")

    @app.get(PREFIX + "/points/{point_id}/histograms", summary="ISL / OSL histograms with a log-normal fit")
    def point_histograms(request: Request, point_id: ItemId):
        return db.blob(request, point_id, "histograms")

    @app.get(PREFIX + "/points/{point_id}/timeline", summary="Request timeline (compact arrays), rows by "
             "conversation stream or by lane")
    def point_timeline(request: Request, point_id: ItemId,
                       by: Literal["conversation", "lane"] = "conversation"):
        return db.blob(request, point_id, f"timeline_{by}")

    @app.get(PREFIX + "/points/{point_id}/inferencex", summary="The point as InferenceX's flat AgentX row")
    def point_inferencex(point_id: ItemId):
        try:
            return _json(export_row(db.engine, point_id))
        except AgentxError as e:
            raise HTTPException(404, str(e)) from None


def _frontier_routes(app: FastAPI, db: _Reads) -> None:
    """Frontiers and interpolation on them."""

    @app.get(PREFIX + "/frontier", summary="Pareto frontier per (model, hardware, engine, workload), or per workload "
             "over all deployments; low-confidence points apart")
    def get_frontier(f: Annotated[Filters, Depends(_filters)], x: XMetric = fr.CANONICAL[0],
                     y: YMetric = fr.CANONICAL[1], overall: bool = False,
                     spread_limit: SpreadLimit = ANSWER_SPREAD_LIMIT):
        skipped = []
        curves = fr.frontier(fr.load_points(db.engine, f, x, y, skipped), x, y, per_curve=not overall,
                             spread_limit=spread_limit)
        return _json({"x": x, "y": y, "curves": [{"key": c.key, "points": c.points, "invalid": c.invalid,
                                                  "low_confidence": c.low_confidence} for c in curves],
                      "skipped": skipped})

    @app.get(PREFIX + "/frontier/interpolate", summary="The best y at or better than x on each curve, within one "
             "deployment configuration (named, with its concurrency; flagged when interpolated); null where no "
             "point reaches x")
    def interpolate(f: Annotated[Filters, Depends(_filters)], at: Annotated[float, Query(allow_inf_nan=False)],
                    x: XMetric = fr.CANONICAL[0], y: YMetric = fr.CANONICAL[1],
                    spread_limit: SpreadLimit = ANSWER_SPREAD_LIMIT):
        skipped = []
        curves = fr.frontier(fr.load_points(db.engine, f, x, y, skipped), x, y, spread_limit=spread_limit)
        return _json({"x": x, "y": y, "at": at, "curves": [_answer(c.key, fr.at_x(c, x, y, at)) for c in curves],
                      "skipped": skipped})


def _dataset_routes(app: FastAPI, db: _Reads) -> None:
    """Datasets and their conversations."""

    @app.get(PREFIX + "/datasets", summary="Datasets")
    def list_datasets():
        return _json(db.rows(select(datasets).order_by(datasets.c.id)))

    @app.get(PREFIX + "/datasets/{dataset_id}/conversations", summary="A dataset's conversations (totals)")
    def list_conversations(dataset_id: ItemId, limit: Annotated[int, Query(ge=1, le=10000)] = 1000,
                           offset: Annotated[int, Query(ge=0, le=MAX_ID)] = 0):
        db.one(select(datasets.c.id).where(datasets.c.id == dataset_id), f"dataset {dataset_id}")
        cols = [c for c in conversations.c if c.name != "tree"]
        return _json(db.rows(select(*cols).where(conversations.c.dataset_id == dataset_id)
                             .order_by(conversations.c.id).limit(limit).offset(offset)))

    @app.get(PREFIX + "/conversations/{conversation_id}", summary="One conversation with its structure (flamegraph)")
    def get_conversation(conversation_id: ItemId):
        row = db.one(select(conversations).where(conversations.c.id == conversation_id), f"conversation {conversation_id}")
        row["tree"] = msgspec.Raw(strict_json(row["tree"]))  # a corrupt row's tree is null, not a 500
        return _json(row)


def _trust(result_text: str | None, point_id: int) -> dict:
    """A point's provenance, validity rules with their figures and diagnosis (what its page shows),
    and where to download its result.json."""
    try:
        result = json.loads(result_text) if result_text else None
    except ValueError:  # a corrupt row: the point's other fields still show
        result = None
    if not isinstance(result, dict) or not result:
        return {"provenance": None, "validity": None, "diagnosis": None, "result_url": None}
    v = result.get("validity") or {}
    return {"provenance": provenance(result), "diagnosis": diagnosis(result),
            "validity": {"valid": v.get("valid"), "reasons": v.get("reasons"), "rules": v.get("rules"),
                         "low_sample": v.get("low_sample")},
            "result_url": f"{PREFIX}/points/{point_id}/result.json"}


def _answer(key: dict, found: dict | None) -> dict:
    """One curve's "y at x": the value and which configuration and concurrency give it."""
    if found is None:
        return {"key": key, "value": None, "interpolated": None, "configuration": None, "deployment_id": None,
                "concurrency": [], "point_ids": []}
    return {"key": key, **found}


def strict_json(text: str | None) -> bytes:
    """Stored JSON as standard JSON: imports refuse non-finite numbers, but a row stored before
    they did may hold NaN / Infinity tokens, sent as null."""
    data = (text or "null").encode()
    if b"NaN" not in data and b"Infinity" not in data:
        try:
            msgspec.json.decode(data)
            return data
        except msgspec.DecodeError:  # a corrupt row (not JSON): null, never a broken answer
            return b"null"
    try:
        return msgspec.json.encode(json.loads(data))  # msgspec writes a non-finite float as null
    except ValueError:
        return b"null"


class RequestGuard:
    """ASGI middleware run before any route reads a body: the upload endpoint's bearer token is
    checked from the headers (401 / 403 before a byte of the body is read), its body must declare
    a Content-Length within `max_upload_bytes` (h11 holds the client to it). No other route reads
    a body."""

    def __init__(self, app, token: str | None, max_upload_bytes: int):
        self.app, self.token, self.max_upload = app, token, max_upload_bytes

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        if scope["path"] != UPLOAD_PATH or scope["method"] != "POST":
            return await self.app(scope, receive, send)
        headers = dict(scope["headers"])
        length, auth = headers.get(b"content-length"), headers.get(b"authorization", b"")
        refusal, limit = None, self.max_upload
        if not self.token:
            refusal = 403, "uploads are disabled: start the server with --token"
        elif not (auth[:7].lower() == b"bearer " and hmac.compare_digest(auth[7:].strip(), self.token.encode())):
            refusal = 401, "a valid bearer token is required"
        elif length is None:
            refusal = 411, "an upload needs a Content-Length header"
        if refusal is None and length is not None:
            if not length.isdigit() or len(length) > 18:
                refusal = 400, "Content-Length: not a number"
            elif int(length) > limit:
                refusal = 413, f"body of {int(length):,} bytes, over the bound of {limit:,}"
        if refusal is None and b"chunked" in headers.get(b"transfer-encoding", b"").lower():
            refusal = 411, "a body needs a Content-Length header (no chunked encoding)"
        if refusal is None:
            return await self.app(scope, receive, send)
        status, detail = refusal
        extra = [(b"www-authenticate", b"Bearer")] if status == 401 else []
        body = msgspec.json.encode({"detail": detail})
        await send({"type": "http.response.start", "status": status, "headers": [
            (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"), *extra]})
        await send({"type": "http.response.body", "body": body})


class SlashRedirect:
    """A path with a trailing slash that names a route without it is redirected (307) with a
    relative Location (the path, with its query): never a host taken from the request's headers."""

    def __init__(self, app, router):
        self.app, self.router = app, router

    async def __call__(self, scope, receive, send):
        path = scope.get("path", "")
        if scope["type"] == "http" and len(path) > 1 and path.endswith("/") and not path.startswith("//"):
            bare = {**scope, "path": path.rstrip("/")}
            if bare["path"] and any(route.matches(bare)[0] != Match.NONE for route in self.router.routes):
                raw = (scope.get("raw_path") or path.encode()).rstrip(b"/")
                query = scope.get("query_string") or b""
                await send({"type": "http.response.start", "status": 307, "headers": [
                    (b"location", raw + (b"?" + query if query else b"")), (b"content-length", b"0")]})
                await send({"type": "http.response.body", "body": b""})
                return
        await self.app(scope, receive, send)


def _authorize(token: str | None, credentials) -> None:
    if not token:
        raise HTTPException(403, "uploads are disabled: start the server with --token")
    if credentials is None or not hmac.compare_digest(credentials.credentials.encode(), token.encode()):
        raise HTTPException(401, "a valid bearer token is required", headers={"WWW-Authenticate": "Bearer"})


def _import_upload(engine: Engine, files: list[UploadFile], upload_dir: Path | None) -> dict:
    """Store the uploaded files as a run folder, validated as `agentx db import` does; the folder
    is removed unless it became a new point (whose flamegraphs read it)."""
    from agentx.results.db import LOCK_TIMEOUT_S, default_path
    from agentx.results.isolated import import_isolated

    names = [f.filename for f in files]
    bad = [n for n in names if n not in UPLOAD_FILES]
    if bad or len(set(names)) != len(names):
        shown = [str(n)[:60] for n in names[:10]]
        raise HTTPException(422, f"files: want distinct names among {', '.join(UPLOAD_FILES)}, got {shown}")
    root = upload_dir or default_path().parent / "uploads"
    root.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix="run-", dir=root))
    keep = False
    try:
        for f in files:
            with open(folder / f.filename, "wb") as out:
                shutil.copyfileobj(f.file, out)
        done = import_isolated(engine, folder)  # what it allocates goes back to the system with its process
        if done.kind == "busy":  # another program holds the lock: the client tries again later
            raise HTTPException(503, done.message, headers={"Retry-After": str(int(LOCK_TIMEOUT_S))})
        if done.kind == "refused":
            raise HTTPException(422, done.message.replace(str(folder) + "/", "").replace(str(folder), "upload"))
        if done.kind == "failed":
            raise HTTPException(500, done.message)
        keep = done.new
    finally:
        if not keep:
            shutil.rmtree(folder, ignore_errors=True)
    return {"point_id": done.point_id, "new": done.new}
