"""A run folder: `run.json` (settings, version and command line at start; client health and
`finished` at the end; `status`: running, complete, or failed with the error that ended it),
`records.jsonl` (+ `records.parquet`, `records.csv`), `server_metrics.jsonl`, `trees.jsonl` (a row
per finished session tree), `power.jsonl` (with `--power`) and `result.json`, which `report()`
rebuilds from the rest (also for a run that was killed)."""

from __future__ import annotations

import json
import os
import platform
import sys
from datetime import datetime, timezone
from pathlib import Path

from agentx.errors import AgentxError
from agentx.metrics.scrape import summary_series
from agentx.metrics.summary import summarize
from agentx.power.energy import window_energy
from agentx.power.sampler import read_window_power
from agentx.records import read_jsonl, read_records, write_csv, write_parquet


class RunFolder:
    """The files of one run as it goes."""

    def __init__(self, path: Path, run_id: str, settings: dict, command: str):
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        if (self.path / "records.jsonl").exists():
            raise AgentxError(f"{self.path} already holds a run; choose another", "out")
        self.info = {
            "run_id": run_id, "agentx_version": agentx_version(), "command": command,
            "start_time": datetime.now(timezone.utc).isoformat(), "host": platform.node(),
            "settings": settings, "finished": False, "status": "running",
        }
        self.write_info()
        self.trees = None

    def write_info(self) -> None:
        (self.path / "run.json").write_text(json.dumps(self.info, indent=1, default=str))

    def open_trees(self) -> None:
        self.trees = open(self.path / "trees.jsonl", "ab", buffering=0)

    def write_tree(self, tree, profile_end: float) -> None:
        """The row of a finished session tree (the session metrics read them)."""
        first_t = min(n.request.t for n in tree.graph.nodes)
        row = {
            "tree": tree.uid, "lane": tree.lane, "session": tree.graph.session.id,
            "whole": tree.started_in_profile and tree.last_end is not None and tree.last_end <= profile_end,
            "replay_wall_s": (tree.last_end or 0) - (tree.first_start or 0),
            "recorded_wall_s": tree.graph.session.duration - first_t,
        }
        self.trees.write(json.dumps(row).encode() + b"\n")

    def finish(self, client: dict) -> None:
        """The run ended: client health, `finished`, and the records as Parquet."""
        self.trees.close()
        self.info["client"] = client
        self.info["finished"] = True
        records = read_records(self.path)
        write_parquet(records, self.path)
        write_csv(records, self.path)
        self.info["status"] = "complete"
        self.write_info()

    def fail(self, error: BaseException) -> None:
        """The run ended on an error (status failed: importers skip the folder with a note) or was
        interrupted (its records are kept; `report` summarizes them, NOT VALID as unfinished)."""
        if self.trees is not None:
            self.trees.close()
        interrupted = isinstance(error, (KeyboardInterrupt, SystemExit))
        self.info["status"] = "interrupted" if interrupted else "failed"
        self.info["error"] = str(error) or type(error).__name__
        self.write_info()


def report(folder: Path) -> dict:
    """Rebuild the result point from a run folder (also one whose run was killed)."""
    folder = Path(folder)
    info_path = folder / "run.json"
    if not info_path.exists():
        raise AgentxError(f"{folder}: no run.json (not a run folder?)")
    info = json.loads(info_path.read_text())
    records = read_records(folder)
    trees_path = folder / "trees.jsonl"
    trees = read_jsonl(trees_path) if trees_path.exists() else []
    result = summarize(records, info, summary_series(folder / "server_metrics.jsonl"), trees,
                       window_energy(read_window_power(folder / "power.jsonl"), info.get("power_source")))
    (folder / "result.json").write_text(json.dumps(result, indent=1))
    write_csv(records, folder)  # (a killed run's too)
    return result


def command_line() -> str:
    """The command as run, credentials' values replaced (endpoint.py)."""
    from agentx.replay.endpoint import redact_argv

    return " ".join([os.path.basename(sys.argv[0])] + redact_argv(sys.argv[1:]))


def agentx_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("agentx")
    except PackageNotFoundError:
        return "dev"
