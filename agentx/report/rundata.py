"""A run folder for the chart builders: the results package's reader (records as columns), and
the runs of a sweep folder in concurrency order."""

from __future__ import annotations

import json
from pathlib import Path

from agentx.errors import AgentxError
from agentx.results.runfolder import RunFolder as RunData, incomplete, is_run_folder, read_run

__all__ = ["RunData", "complete_runs", "is_run_folder", "read_run", "sweep_folders"]


def sweep_folders(path: Path) -> list[Path]:
    """The complete run folders of a sweep folder (`complete_runs`); none is an error."""
    runs = complete_runs(path)
    if not runs:
        raise AgentxError(f"{path}: neither a run folder (no run.json) nor a sweep folder (no complete run folders "
                          "in it or its deployments' folders)")
    return runs


def complete_runs(path: Path) -> list[Path]:
    """The complete run folders of a sweep folder: directly under it (`bench --concurrency
    A,B`), or one level deeper (`agentx sweep`'s DEPLOYMENT/cN), by deployment then
    concurrency; incomplete runs (failed, or killed and not yet reported) are left out."""
    runs = []
    for p in path.iterdir() if path.is_dir() else ():
        if not p.is_dir() or p.name.startswith("."):  # .interrupted/
            continue
        inner = [p] if is_run_folder(p) else [q for q in p.iterdir() if q.is_dir() and is_run_folder(q)]
        runs += [q for q in inner if incomplete(q) is None]
    return sorted(runs, key=lambda p: (str(p.parent), _concurrency(p), p.name))


def _concurrency(folder: Path) -> int:
    try:
        return json.loads((folder / "run.json").read_text()).get("settings", {}).get("concurrency") or 0
    except ValueError:
        return 0  # read_run names the bad file
