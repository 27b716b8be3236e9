"""Read a run folder through its files (SPEC §2-§4): run.json, result.json, the records
(records.parquet when the run finished, else records.jsonl), server_metrics.jsonl.

Records come back as columns (numpy arrays, strings as lists) so a 100k-request run loads in well
under a second and the importer never builds an object per request.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import msgspec
import numpy as np

from agentx.errors import AgentxError
from agentx.metrics.scrape import read_series

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

    @property
    def n(self) -> int:
        return len(self.columns["start"])


def is_run_folder(path: Path) -> bool:
    return (path / "run.json").is_file()


def find_run_folders(paths: list[Path]) -> list[Path]:
    """The run folders named, or under the folders named (a sweep's output), in path order."""
    found = []
    for path in paths:
        if not path.exists():
            raise AgentxError(f"{path}: no such file or folder")
        if is_run_folder(path):
            found.append(path)
            continue
        inner = sorted(p.parent for p in path.rglob("run.json")
                       if not any(part.startswith(".") for part in p.relative_to(path).parts))  # .interrupted/
        if not inner:
            raise AgentxError(f"{path}: no run.json in it or below it (not a run folder or a sweep folder)")
        found.extend(inner)
    return found


def incomplete(path: Path) -> str | None:
    """Why a run folder cannot be stored (None: it can): a run that failed, or one without its
    summary (a killed run: `agentx report` writes it)."""
    try:
        info = json.loads((path / "run.json").read_bytes())
    except (OSError, ValueError):
        return None  # read_run names what is wrong with it
    if isinstance(info, dict) and info.get("status") == "failed":
        return f"the run failed ({str(info.get('error'))[:200]}); nothing to store"
    if not (path / "result.json").exists():
        if not (path / "records.jsonl").exists():
            return "the run ended before its first request (no records)"
        return f"no result.json (a killed run?): `agentx report {path}` writes it"
    return None


def read_run(path: Path) -> RunFolder:
    info = _json(path / "run.json")
    result_path = path / "result.json"
    if not result_path.exists():
        raise AgentxError(f"{path}: no result.json (a killed run?): `agentx report {path}` writes it")
    result = _json(result_path)
    for key in ("schema_version", "identity", "request_metrics"):
        if key not in result:
            raise AgentxError(f"{result_path}: field {key!r} missing (not an agentx result point)")
    return RunFolder(path, info, result, read_columns(path), read_series(path / "server_metrics.jsonl"))


def _json(path: Path) -> dict:
    if not path.exists():
        raise AgentxError(f"{path}: missing (not a run folder?)")
    try:
        value = json.loads(path.read_bytes())
    except ValueError as e:
        raise AgentxError(f"{path}: not JSON ({e})") from None
    if not isinstance(value, dict):
        raise AgentxError(f"{path}: want a JSON object")
    return value


def read_columns(path: Path) -> dict:
    parquet, jsonl = path / "records.parquet", path / "records.jsonl"
    if parquet.exists():
        import pyarrow.parquet as pq

        table = pq.read_table(parquet, columns=list(FLOAT_FIELDS + INT_FIELDS + STR_FIELDS))
        return {name: _arrow_column(name, table.column(name)) for name in table.column_names}
    if not jsonl.exists():
        raise AgentxError(f"{path}: no records.parquet or records.jsonl")
    rows = []
    lines = jsonl.read_bytes().split(b"\n")
    last = len(lines) - (1 if not lines[-1] else 0)
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rows.append(msgspec.json.decode(line))
        except msgspec.DecodeError as e:
            if i >= last:
                break  # the line being written when the run was killed
            raise AgentxError(f"{jsonl}: line {i}: {e}") from None
    return {name: _column(name, [r.get(name) for r in rows]) for name in FLOAT_FIELDS + INT_FIELDS + STR_FIELDS}


def _arrow_column(name: str, col):
    import pyarrow.compute as pc

    if name in STR_FIELDS:
        return col.to_pylist()
    if name in FLOAT_FIELDS:
        return np.asarray(col.cast("double").to_numpy(zero_copy_only=False), dtype=float)
    return np.asarray(pc.fill_null(col, -1).to_numpy(zero_copy_only=False), dtype=np.int64)


def _column(name: str, values: list):
    if name in STR_FIELDS:
        return values
    if name in FLOAT_FIELDS:
        return np.array([np.nan if v is None else v for v in values], dtype=float)
    return np.array([-1 if v is None else v for v in values], dtype=np.int64)
