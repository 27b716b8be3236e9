"""A run folder's files as columns (numpy arrays, strings as lists) for the chart builders."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from agentx.errors import AgentxError
from agentx.metrics.scrape import read_series
from agentx.records import read_records

FLOAT_FIELDS = ("planned", "start", "end", "ttft")  # None -> NaN
INT_FIELDS = ("lane", "tree", "replay", "stream", "node", "isl_planned", "osl_planned", "theo_cached", "isl", "osl",
              "cached", "chunks")  # None -> -1
STR_FIELDS = ("session", "stream_kind", "phase", "error")


@dataclass
class RunData:
    path: Path
    info: dict  # run.json
    result: dict  # result.json
    columns: dict  # record field -> numpy array, or list for strings
    series: list[dict]  # server_metrics.jsonl rows


def is_run_folder(path: Path) -> bool:
    return (path / "run.json").is_file()


def sweep_folders(path: Path) -> list[Path]:
    """The run folders directly under a sweep folder, in concurrency order."""
    runs = [p for p in path.iterdir() if p.is_dir() and is_run_folder(p)]
    if not runs:
        raise AgentxError(f"{path}: neither a run folder (no run.json) nor a sweep folder (no run folders in it)")
    return sorted(runs, key=lambda p: (_json(p / "run.json").get("settings", {}).get("concurrency") or 0, p.name))


def read_run(path: Path) -> RunData:
    """A finished or killed run; result.json is rebuilt by `agentx report` when it is missing."""
    if not is_run_folder(path):
        raise AgentxError(f"{path}: no run.json (not a run folder?)")
    if not (path / "result.json").is_file():
        raise AgentxError(f"{path}: no result.json (run `agentx report {path}` first)")
    records = read_records(path)
    columns: dict = {}
    for name in FLOAT_FIELDS:
        columns[name] = np.array([np.nan if (v := getattr(r, name)) is None else v for r in records], dtype=float)
    for name in INT_FIELDS:
        columns[name] = np.array([-1 if (v := getattr(r, name)) is None else v for r in records], dtype=np.int64)
    for name in STR_FIELDS:
        columns[name] = [getattr(r, name) for r in records]
    return RunData(path, _json(path / "run.json"), _json(path / "result.json"), columns,
                   read_series(path / "server_metrics.jsonl"))


def _json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except ValueError as e:
        raise AgentxError(f"{path}: not valid JSON ({e})") from None
