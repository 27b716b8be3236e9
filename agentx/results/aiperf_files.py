"""An AIPerf artifact folder's files as typed, bounded Structs (as `runschema` is for agentx run
folders): every field the importer reads is typed and bounded here before any of it is used.
Fields agentx does not read are not checked (AIPerf adds some with every release)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import msgspec

from agentx.errors import AgentxError
from agentx.results.runfolder import _field, decode_json
from agentx.results.runschema import MAX_JSON_FILE, MAX_LINE, MAX_RECORDS, MAX_RECORDS_FILE, Count32, Duration, \
    Lanes, check_time, text
from agentx.traces.model import MAX_NAME, MAX_SECONDS, MAX_TOKENS
from agentx.userfiles import bounded_lines, check_file, shown

Ns = Annotated[int, msgspec.Meta(ge=0, le=2**63 - 1)]
Name = text(MAX_NAME)
Id = Name | Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]


class Millis(msgspec.Struct):
    value: Annotated[float, msgspec.Meta(ge=0, le=MAX_SECONDS * 1000)]


class TokenCount(msgspec.Struct):
    value: Annotated[float, msgspec.Meta(ge=0, le=MAX_TOKENS)]


class Metrics(msgspec.Struct):
    time_to_first_token: Millis | None = None
    input_sequence_length: TokenCount | None = None
    output_sequence_length: TokenCount | None = None
    usage_prompt_cache_read_tokens: TokenCount | None = None


class Metadata(msgspec.Struct):
    request_start_ns: Ns
    request_end_ns: Ns
    x_correlation_id: Id
    credit_issued_ns: Ns | None = None
    root_correlation_id: Id | None = None
    worker_id: Id | None = None
    source_trace_id: Id | None = None
    conversation_id: Id | None = None
    agent_depth: Annotated[int, msgspec.Meta(ge=0, le=1000)] | None = None
    turn_index: Count32 | None = None
    benchmark_phase: Name | None = None
    was_cancelled: bool | None = None


class ErrorInfo(msgspec.Struct):
    type: Name | None = None
    code: Name | int | None = None


class RecordLine(msgspec.Struct):
    """One line of profile_export.jsonl."""
    metadata: Metadata
    metrics: Metrics
    error: ErrorInfo | Name | None = None


class Stat(msgspec.Struct):
    avg: Annotated[float, msgspec.Meta(ge=-1e15, le=1e15)] | None = None


class Phase(msgspec.Struct):
    kind: Name | None = None
    concurrency: Lanes | None = None
    duration: Duration | None = None


class DatasetConfig(msgspec.Struct):
    name: text(500) | None = None
    type: Name | None = None
    path: text(4096) | None = None


class ModelItem(msgspec.Struct):
    name: text(200) | None = None


class Models(msgspec.Struct):
    items: list[ModelItem] = []


class InputConfig(msgspec.Struct):
    phases: list[Phase] = []
    datasets: list[DatasetConfig] = []
    models: Models = msgspec.field(default_factory=Models)


class RunInfo(msgspec.Struct):
    random_seed: Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)] | None = None
    cli_command: text(100_000) | None = None


class Aggregate(msgspec.Struct):
    """profile_export_aiperf.json, the fields agentx reads."""
    benchmark_id: Annotated[str, msgspec.Meta(max_length=50, pattern=r"^[A-Za-z0-9._:-]*$")] | None = None
    aiperf_version: text(50) | None = None
    is_complete: bool | None = None
    was_cancelled: bool | None = None
    start_time: text(40) | None = None
    input_config: InputConfig = msgspec.field(default_factory=InputConfig)
    run_info: RunInfo = msgspec.field(default_factory=RunInfo)
    theoretical_prefix_cache_hit: Stat | None = None
    request_throughput: Stat | None = None
    output_token_throughput: Stat | None = None
    total_token_throughput: Stat | None = None
    benchmark_duration: Stat | None = None
    request_count: Stat | None = None

    def __post_init__(self):
        check_time("start_time", self.start_time)


Value = Annotated[float, msgspec.Meta(ge=-1e300, le=1e300)]


class Series(msgspec.Struct):
    labels: dict[Name, Name] = {}
    stats: dict[text(50), Value] = {}


class ServerMetric(msgspec.Struct):
    series: list[Series] = []


class Endpoint(msgspec.Struct):
    total_fetches: Count32 = 0


class ServerSummary(msgspec.Struct):
    endpoint_info: dict[Name, Endpoint] = {}


class ServerExport(msgspec.Struct):
    """server_metrics_export.json."""
    metrics: dict[Name, ServerMetric] = {}
    summary: ServerSummary = msgspec.field(default_factory=ServerSummary)


def read_records(path: Path) -> list[RecordLine]:
    decoder = msgspec.json.Decoder(RecordLine)
    rows = []
    check_file(path, MAX_RECORDS_FILE)
    for i, line in bounded_lines(path, MAX_RECORDS_FILE, MAX_LINE):
        if not line.strip():
            continue
        try:
            rows.append(decoder.decode(line))
        except msgspec.ValidationError as e:
            raise AgentxError(f"{shown(path)}: line {i}: {_field(e)}") from None
        except (msgspec.DecodeError, UnicodeDecodeError, RecursionError) as e:
            raise AgentxError(f"{shown(path)}: line {i}: not JSON ({e})") from None
        row = rows[-1].metadata
        if row.request_end_ns < row.request_start_ns:
            raise AgentxError(f"{shown(path)}: line {i}: field metadata.request_end_ns: before request_start_ns")
        if len(rows) > MAX_RECORDS:
            raise AgentxError(f"{shown(path)}: over {MAX_RECORDS:,} records")
    return rows


def read_aggregate(path: Path) -> Aggregate:
    decode_json(path, dict, MAX_JSON_FILE)  # a JSON object of bounded depth
    return decode_json(path, Aggregate, MAX_JSON_FILE)


def read_server(path: Path) -> ServerExport | None:
    if not path.exists() and not path.is_symlink():
        return None
    decode_json(path, dict, MAX_JSON_FILE)
    return decode_json(path, ServerExport, MAX_JSON_FILE)
