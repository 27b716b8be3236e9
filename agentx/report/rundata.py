"""A run folder for the chart builders: the results package's reader (records as columns), and
the runs of a sweep folder in concurrency order."""

from __future__ import annotations

import json
from pathlib import Path

from agentx.errors import AgentxError
from agentx.results.runfolder import RunFolder as RunData, is_run_folder, read_run

__all__ = ["RunData", "is_run_folder", "read_run", "sweep_folders"]


def sweep_folders(path: Path) -> list[Path]:
    """The run folders directly under a sweep folder, in concurrency order."""
    runs = [p for p in path.iterdir() if p.is_dir() and is_run_folder(p)]
    if not runs:
        raise AgentxError(f"{path}: neither a run folder (no run.json) nor a sweep folder (no run folders in it)")
    return sorted(runs, key=lambda p: (_concurrency(p), p.name))


def _concurrency(folder: Path) -> int:
    try:
        return json.loads((folder / "run.json").read_text()).get("settings", {}).get("concurrency") or 0
    except ValueError:
        return 0  # read_run names the bad file
