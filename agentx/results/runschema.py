"""A run folder's files as typed, bounded Structs (SPEC §8's import bounds): what the importer,
the API's upload and `agentx db import` read from a user is decoded into these before any of it
is used, so a wrong type, a non-finite or huge number, an overlong label or a deep document is
one line naming the file, the record and the field, and nothing is stored.

Strings that become columns fit them (the lengths of `schema.py`); integers that become columns
fit a 32-bit INTEGER (PostgreSQL's); floats are finite (the JSON decoder refuses NaN, Infinity
and out-of-range numbers) and within the trace model's bounds.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

import msgspec

from agentx.traces.model import MAX_NAME, MAX_SECONDS, MAX_TOKENS

INT32 = 2**31 - 1
MAX_GPUS = 100_000
MAX_LANES = 100_000
MAX_CLOCK_SCALE = 10_000.0
MAX_GRID = 2_000_000  # points of a chart series (a run of 23 days on the 1 s grid)
MAX_RECORDS = 20_000_000
MAX_DEPTH = 64  # nesting of a stored JSON document (result.json is 4 deep)
MAX_LINE = 16 << 20  # one line of a JSON-lines file (a record with --keep-chunks of a long answer)
MAX_JSON_FILE = 64 << 20  # run.json, result.json, dataset.json
MAX_RECORDS_FILE = 4 << 30  # records.jsonl / records.parquet
MAX_SERIES_FILE = 1 << 30  # server_metrics.jsonl


def text(n: int):
    return Annotated[str, msgspec.Meta(max_length=n, pattern=r"^[^\x00]*$")]


Count32 = Annotated[int, msgspec.Meta(ge=0, le=INT32)]
Gpus = Annotated[int, msgspec.Meta(ge=1, le=MAX_GPUS)]
Lanes = Annotated[int, msgspec.Meta(ge=1, le=MAX_LANES)]
Scale = Annotated[float, msgspec.Meta(gt=0, le=MAX_CLOCK_SCALE)]
Time = Annotated[float, msgspec.Meta(ge=-MAX_SECONDS, le=MAX_SECONDS)]
Duration = Annotated[float, msgspec.Meta(ge=0, le=MAX_SECONDS)]
Metric = Annotated[float, msgspec.Meta(ge=-1e15, le=1e15)]  # a summary figure (tok/s, s, a rate)
RunId = Annotated[str, msgspec.Meta(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9._:-]+$")]


class Identity(msgspec.Struct):
    """result.json's `identity`: the deployment's labels and the point's settings."""
    model: text(200) | None = None
    hardware: text(100) | None = None
    gpus: Gpus | None = None
    engine: text(100) | None = None
    engine_version: text(100) | None = None
    precision: text(50) | None = None
    parallelism: text(100) | None = None
    spec_decoding: text(100) | None = None
    kv_offload: text(100) | None = None
    router: text(100) | None = None
    engine_settings: text(300) | None = None
    concurrency: Lanes | None = None
    dataset: text(500) | None = None
    variant: text(100) | None = None
    clock_scale: Scale | None = None


class Requests(msgspec.Struct):
    total: Count32 | None = None
    profiled: Count32 | None = None
    succeeded: Count32 | None = None
    errors: dict[text(MAX_NAME), Count32] = {}


class Validity(msgspec.Struct):
    valid: bool | None = None


def check_time(name: str, value: str | None) -> None:
    """A date and time field is ISO 8601 (stored as given, so checked here): a ValueError
    `NAME: ...` that msgspec reports at the struct's path."""
    if value is None:
        return
    try:
        datetime.fromisoformat(value)
    except ValueError as e:
        raise ValueError(f"{name}: not an ISO 8601 date and time ({value!r}: {e})") from None


class Provenance(msgspec.Struct):
    start_time: text(40) | None = None
    run_id: RunId | None = None

    def __post_init__(self):
        check_time("start_time", self.start_time)


Quantiles = dict[text(20), Metric | None]


class Throughput(msgspec.Struct):
    total_tok_s_per_gpu: Metric | None = None
    output_tok_s_per_gpu: Metric | None = None
    input_tok_s_per_gpu: Metric | None = None
    total_tok_s: Metric | None = None
    output_tok_s: Metric | None = None


class Cache(msgspec.Struct):
    theoretical_hit_rate: Metric | None = None


class RequestMetrics(msgspec.Struct):
    ttft_s: Quantiles | None = None
    e2el_s: Quantiles | None = None
    itl_s: Quantiles | None = None
    interactivity_tok_s: Quantiles | None = None
    e2e_normalized_interactivity_tok_s: Quantiles | None = None
    throughput: Throughput | None = None
    cache: Cache | None = None


class ServerMetrics(msgspec.Struct):
    prefix_hit_rate: Metric | None = None
    kv_usage_mean: Metric | None = None


class Power(msgspec.Struct):
    """The measured power of `bench --power` (SPEC §3): the power columns when valid."""
    valid: bool = False
    source: text(2000) | None = None
    avg_w: Metric | None = None
    peak_w: Metric | None = None
    joules_per_output_token: Metric | None = None
    joules_per_total_token: Metric | None = None
    total_tok_s_per_mw: Metric | None = None


Share = Annotated[float, msgspec.Meta(ge=0, le=1)]


class Accuracy(msgspec.Struct):
    """`bench --eval`'s figure (SPEC §3, "Accuracy"): what the point's page and API read."""
    eval: text(100)
    n: Annotated[int, msgspec.Meta(ge=1, le=INT32)]
    correct: Count32
    accuracy: Share
    interval: Annotated[list[Share], msgspec.Meta(min_length=2, max_length=2)]
    errors: Count32 = 0
    reference: Share | None = None
    reference_source: text(100) | None = None


class Result(msgspec.Struct):
    """result.json (SPEC §4): the fields the database's columns come from."""
    schema_version: Annotated[int, msgspec.Meta(ge=1, le=1000)]
    identity: Identity
    request_metrics: RequestMetrics
    requests: Requests = msgspec.field(default_factory=Requests)
    validity: Validity = msgspec.field(default_factory=Validity)
    provenance: Provenance = msgspec.field(default_factory=Provenance)
    server_metrics: ServerMetrics | None = None
    power: Power | None = None
    accuracy: Accuracy | None = None


class RunSettings(msgspec.Struct):
    clock_scale: Scale | None = None
    token_scale: Annotated[int, msgspec.Meta(ge=1, le=1_000_000)] | None = None


class RunInfo(msgspec.Struct):
    """run.json: its id and the settings the charts need."""
    run_id: RunId | None = None
    settings: RunSettings = msgspec.field(default_factory=RunSettings)


Small = Annotated[int, msgspec.Meta(ge=0, le=INT32)]
Tok = Annotated[int, msgspec.Meta(ge=0, le=MAX_TOKENS)]


class RecordRow(msgspec.Struct):
    """One line of records.jsonl, the columns the importer reads (agentx.records.Record)."""
    lane: Small
    tree: Small
    replay: Small
    session: text(300)
    stream: Small
    stream_kind: text(20)
    node: Small
    phase: text(20)
    planned: Time
    start: Duration
    end: Duration
    isl_planned: Tok
    osl_planned: Tok
    theo_cached: Tok
    ttft: Duration | None = None
    isl: Tok | None = None
    osl: Tok | None = None
    cached: Tok | None = None
    chunks: Tok = 0
    status: Annotated[int, msgspec.Meta(ge=0, le=999)] = 0
    error: text(MAX_NAME) | None = None


class Scrape(msgspec.Struct):
    """One line of server_metrics.jsonl."""
    t: Duration
    phase: text(20) | None = None
    samples: dict[text(MAX_NAME), Annotated[float, msgspec.Meta(ge=-1e300, le=1e300)]] = {}


# column -> (low, high) of a records.parquet column, as RecordRow bounds the JSONL (None: -1 / NaN)
COLUMN_BOUNDS: dict[str, tuple[float, float]] = {
    **{k: (0, INT32) for k in ("lane", "tree", "replay", "stream", "node")},
    **{k: (0, MAX_TOKENS) for k in ("isl_planned", "osl_planned", "theo_cached", "isl", "osl", "cached", "chunks")},
    "status": (0, 999), "planned": (-MAX_SECONDS, MAX_SECONDS),
    **{k: (0, MAX_SECONDS) for k in ("start", "end", "ttft")},
}
STR_BOUNDS = {"session": 300, "stream_kind": 20, "phase": 20, "error": MAX_NAME}
