"""Read a run folder through its files (SPEC §2-§4): run.json, result.json, the records
(records.parquet when the run finished, else records.jsonl), server_metrics.jsonl, power.jsonl.

Every file is checked by type and size before it is opened and decoded into the bounded Structs
of `runschema` before any of it is used (SPEC §8, import bounds). Records come back as columns
(numpy arrays, strings as lists) so a 100k-request run loads in well under a second and the
importer never builds an object per request.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import msgspec
import numpy as np

from agentx.errors import AgentxError
from agentx.results import runschema as rs
from agentx.userfiles import bounded_lines, check_file, check_folder, depth_problem, is_regular, read_bounded, shown
from agentx.power.sampler import PowerSample

# record field -> dtype of its column (None fields become NaN in float columns, -1 in int ones)
FLOAT_FIELDS = ("planned", "start", "end", "ttft")
INT_FIELDS = ("lane", "tree", "replay", "stream", "node", "isl_planned", "osl_planned", "theo_cached", "isl", "osl",
              "cached", "chunks", "status")
STR_FIELDS = ("session", "stream_kind", "phase", "error")


@dataclass
class RunFolder:
    path: Path
    info: dict  # run.json
    result: dict  # result.json
    columns: dict  # field -> numpy array (numbers) or list (strings)
    series: list[dict]  # server_metrics.jsonl rows
    typed: rs.Result  # result.json's columns, validated
    run_id: str
    power: list = None  # power.jsonl reads (agentx/power/sampler.py), [] without --power

    @property
    def n(self) -> int:
        return len(self.columns["start"])


def is_run_folder(path: Path) -> bool:
    return is_regular(path / "run.json")


def find_run_folders(paths: list[Path]) -> list[Path]:
    """The run folders named, or under the folders named (a sweep's output), in path order."""
    found = []
    for path in paths:
        check_folder(path)
        if is_run_folder(path):
            found.append(path)
            continue
        inner = sorted(p.parent for p in path.rglob("run.json")
                       if not any(part.startswith(".") for part in p.relative_to(path).parts))  # .interrupted/
        if not inner:
            raise AgentxError(f"{shown(path)}: no run.json in it or below it (not a run folder or a sweep folder)")
        found.extend(inner)
    return found


def incomplete(path: Path) -> str | None:
    """Why a run folder cannot be stored (None: it can): a run that failed, or one without its
    summary (a killed run: `agentx report` writes it)."""
    try:
        info = decode_json(path / "run.json")
    except AgentxError:
        return None  # read_run names what is wrong with it
    if isinstance(info, dict) and info.get("status") == "failed":
        return f"the run failed ({str(info.get('error'))[:200]}); nothing to store"
    if not (path / "result.json").exists() and not (path / "result.json").is_symlink():  # a loop: read_run says so
        if not (path / "records.jsonl").exists():
            return "the run ended before its first request (no records)"
        return f"no result.json (a killed run?): `agentx report {path}` writes it"
    return None


def decode_json(path: Path, type_=object, limit: int = rs.MAX_JSON_FILE, data: bytes | None = None):
    """A JSON document of a user's file as `type_`; errors name the file and the field."""
    data = read_bounded(path, limit) if data is None else data
    try:
        value = msgspec.json.decode(data, type=type_)
    except msgspec.ValidationError as e:
        raise AgentxError(f"{shown(path)}: {_field(e)}") from None
    except (msgspec.DecodeError, UnicodeDecodeError) as e:
        raise AgentxError(f"{shown(path)}: not JSON ({e})") from None
    except RecursionError:
        raise AgentxError(f"{shown(path)}: JSON nested too deeply") from None
    problem = depth_problem(value, rs.MAX_DEPTH)
    if problem:
        raise AgentxError(f"{shown(path)}: {problem}")
    return value


def _field(e: msgspec.ValidationError) -> str:
    """`field a.b: problem` from msgspec's `problem - at `$.a.b``."""
    message, _, at = str(e).rpartition(" - at `")
    if not message:
        message, at = str(e), "$"
    at = at.rstrip("`").removeprefix("$").removeprefix(".")
    if named := re.fullmatch(r"([a-z_]+): (.*)", message):  # a Struct's own check (__post_init__) names its field
        at, message = f"{at}.{named[1]}" if at else named[1], named[2]
    if message.startswith("Object missing required field `"):
        name = message.split("`")[1]
        return f"field {at + '.' if at else ''}{name}: missing"
    if not at and message.startswith("Expected `object`"):
        return f"want a JSON object ({message})"
    return f"field {at}: {message}" if at else message


def read_run(path: Path) -> RunFolder:
    check_folder(path)
    info_path, result_path = path / "run.json", path / "result.json"
    check_file(info_path, rs.MAX_JSON_FILE)
    if not result_path.exists() and not result_path.is_symlink():
        raise AgentxError(f"{shown(path)}: no result.json (a killed run?): `agentx report {shown(path)}` writes it")
    info_data, result_data = read_bounded(info_path, rs.MAX_JSON_FILE), read_bounded(result_path, rs.MAX_JSON_FILE)
    info = decode_json(info_path, dict, data=info_data)
    result = decode_json(result_path, dict, data=result_data)
    for key in ("schema_version", "identity", "request_metrics"):
        if key not in result:
            raise AgentxError(f"{shown(result_path)}: field {key!r} missing (not an agentx result point)")
    typed_info = decode_json(info_path, rs.RunInfo, data=info_data)
    typed = decode_json(result_path, rs.Result, data=result_data)
    run_id = typed_info.run_id or typed.provenance.run_id
    if run_id is None:
        raise AgentxError(f"{shown(info_path)}: field run_id missing")
    columns = read_columns(path)
    _check_counts(path, typed, columns)
    series = read_scrapes(path / "server_metrics.jsonl")
    _check_grid(path, typed, typed_info, columns, series)
    return RunFolder(path, info, result, columns, series, typed, run_id, read_power_reads(path / "power.jsonl"))


def _check_counts(path: Path, typed: rs.Result, columns: dict) -> None:
    """The records are the requests result.json counts (a torn or truncated file is not a run)."""
    total, n = typed.requests.total, len(columns["start"])
    if total is not None and n != total:
        raise AgentxError(f"{shown(path)}: {n:,} records, but result.json field requests.total says {total:,}")


def _check_grid(path: Path, typed: rs.Result, info: rs.RunInfo, columns: dict, series: list[dict]) -> None:
    """The charts' 1 s grid (in the run's clock) stays within MAX_GRID points."""
    step = typed.identity.clock_scale or info.settings.clock_scale or 1.0
    ends = columns["end"]
    horizon = max([float(np.nanmax(ends)) if len(ends) and not np.isnan(ends).all() else 0.0]
                  + [s["t"] for s in series])
    if horizon / step > rs.MAX_GRID:
        raise AgentxError(f"{shown(path)}: the run spans {horizon:,.0f} s at a clock scale of {step:g}: over "
                          f"{rs.MAX_GRID:,} points of the charts' 1 s grid")


def read_power_reads(path: Path) -> list[PowerSample]:
    """power.jsonl (bench --power) as typed, bounded reads; none without the file."""
    if not path.exists() and not path.is_symlink():
        return []
    return _jsonl(path, PowerSample, rs.MAX_SERIES_FILE)


def read_scrapes(path: Path) -> list[dict]:
    if not path.exists() and not path.is_symlink():
        return []
    return [msgspec.to_builtins(row) for row in _jsonl(path, rs.Scrape, rs.MAX_SERIES_FILE)]


def _jsonl(path: Path, row_type: type, limit: int) -> list:
    """Every line as `row_type`. A run killed while writing leaves a torn last line: a line
    without its newline at the end that is the start of a JSON object is skipped; a bad line
    anywhere else (or a NUL byte anywhere) is an error."""
    decoder = msgspec.json.Decoder(row_type)
    rows, pending = [], None
    for i, line in bounded_lines(path, limit, rs.MAX_LINE):
        if pending is not None:
            raise pending
        if not line.strip():
            continue
        if b"\x00" in line:
            raise AgentxError(f"{shown(path)}: line {i}: a NUL byte (not JSON text)")
        try:
            rows.append(decoder.decode(line))
        except msgspec.ValidationError as e:
            raise AgentxError(f"{shown(path)}: line {i}: {_field(e)}") from None
        except (msgspec.DecodeError, UnicodeDecodeError, RecursionError) as e:
            pending = AgentxError(f"{shown(path)}: line {i}: not JSON ({e})")
            torn = line.lstrip().startswith(b"{")
        if len(rows) > rs.MAX_RECORDS:
            raise AgentxError(f"{shown(path)}: over {rs.MAX_RECORDS:,} lines")
    if pending is not None and not (torn and read_tail(path) != b"\n"):
        raise pending  # else: the line being written when the run was killed
    return rows


def read_tail(path: Path) -> bytes:
    with open(path, "rb") as f:
        f.seek(-1, 2)
        return f.read(1)


def read_columns(path: Path) -> dict:
    parquet, jsonl = path / "records.parquet", path / "records.jsonl"
    if parquet.exists() or parquet.is_symlink():
        return _parquet_columns(parquet)
    if not jsonl.exists() and not jsonl.is_symlink():
        raise AgentxError(f"{shown(path)}: no records.parquet or records.jsonl")
    rows = _jsonl(jsonl, rs.RecordRow, rs.MAX_RECORDS_FILE)
    return {name: _column(name, [getattr(r, name) for r in rows]) for name in FLOAT_FIELDS + INT_FIELDS + STR_FIELDS}


def _parquet_columns(path: Path) -> dict:
    import pyarrow as pa
    import pyarrow.parquet as pq

    check_file(path, rs.MAX_RECORDS_FILE)
    try:
        names = set(pq.read_schema(path).names)
        missing = [name for name in FLOAT_FIELDS + INT_FIELDS + STR_FIELDS if name not in names]
        if missing:
            raise AgentxError(f"{shown(path)}: column {missing[0]} missing (not agentx records)")
        table = pq.read_table(path, columns=list(FLOAT_FIELDS + INT_FIELDS + STR_FIELDS))
    except (pa.ArrowException, OSError, ValueError) as e:
        raise AgentxError(f"{shown(path)}: not a readable Parquet file "
                          f"({str(e).splitlines()[0] if str(e) else type(e).__name__})") from None
    if table.num_rows > rs.MAX_RECORDS:
        raise AgentxError(f"{shown(path)}: {table.num_rows:,} records, over the bound of {rs.MAX_RECORDS:,}")
    return {name: _arrow_column(path, name, table.column(name)) for name in FLOAT_FIELDS + INT_FIELDS + STR_FIELDS}


def _arrow_column(path: Path, name: str, col):
    import pyarrow as pa

    try:
        if name in STR_FIELDS:
            values = col.cast(pa.string()).to_pylist()
        else:
            values = col.cast(pa.float64()).to_numpy(zero_copy_only=False)  # an all-null column is a null type
    except (pa.ArrowException, ValueError):
        raise AgentxError(f"{shown(path)}: column {name}: want {'text' if name in STR_FIELDS else 'numbers'} "
                          f"({col.type})") from None
    if name in STR_FIELDS:
        limit = rs.STR_BOUNDS[name]
        for i, v in enumerate(values):
            if v is not None and (len(v) > limit or "\x00" in v):
                raise AgentxError(f"{shown(path)}: row {i} column {name}: over {limit} characters or a NUL")
        return values
    values = np.asarray(values, dtype=float)
    low, high = rs.COLUMN_BOUNDS[name]
    bad = np.flatnonzero(~np.isnan(values) & ((values < low) | (values > high)))
    if len(bad) or (np.isinf(values).any()):
        i = int(bad[0]) if len(bad) else int(np.flatnonzero(np.isinf(values))[0])
        raise AgentxError(f"{shown(path)}: row {i} column {name}: {values[i]!r} outside [{low:g}, {high:g}]")
    if name in FLOAT_FIELDS:
        return values
    if (values[~np.isnan(values)] % 1).any():
        raise AgentxError(f"{shown(path)}: column {name}: want whole numbers")
    return np.where(np.isnan(values), -1, values).astype(np.int64)


def _column(name: str, values: list):
    if name in STR_FIELDS:
        return values
    if name in FLOAT_FIELDS:
        return np.array([np.nan if v is None else v for v in values], dtype=float)
    return np.array([-1 if v is None else v for v in values], dtype=np.int64)
