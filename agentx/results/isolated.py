"""An uploaded run folder is imported in a child process, one at a time.

What an import allocates (a 100 MB server_metrics.jsonl decoded, pyarrow's reserved pools) stays
with a process after it is freed: refusing 64 large uploads grew `agentx serve` from 0.4 to 1.7 GB
of address space and its next valid upload failed under a 2 GB limit (issue #46). A child gives it
all back when it exits. The database URL goes to the child on its stdin (never on its command
line, where a password would show); the outcome comes back as one JSON line on its stdout.

    python -m agentx.results.isolated   (stdin: {"url": ..., "folder": ...})
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.engine import Engine

_ONE_AT_A_TIME = threading.Lock()


@dataclass(frozen=True)
class Outcome:
    kind: str  # "stored" | "busy" (the database is locked) | "refused" | "failed" (the child died)
    message: str = ""
    point_id: int | None = None
    new: bool = False


def import_isolated(engine: Engine, folder: Path) -> Outcome:
    """`import_run(engine, folder)` in a child process (in this one for an in-memory SQLite
    database, which a child cannot see)."""
    if engine.dialect.name == "sqlite" and engine.url.database in (None, "", ":memory:"):
        return _import(engine, folder)
    request = json.dumps({"url": engine.url.render_as_string(hide_password=False), "folder": str(folder)})
    with _ONE_AT_A_TIME:
        proc = subprocess.run([sys.executable, "-m", "agentx.results.isolated"], input=request, capture_output=True,
                              text=True)
    try:
        return Outcome(**json.loads(proc.stdout.strip().splitlines()[-1]))
    except (IndexError, ValueError, TypeError):
        why = (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
        return Outcome("failed", f"the import's process ended without an answer ({why[:200]})")


def _import(engine: Engine, folder: Path) -> Outcome:
    from agentx.errors import AgentxError
    from agentx.results.db import DatabaseBusy
    from agentx.results.importer import import_run

    try:
        done = import_run(engine, folder)
    except DatabaseBusy as e:
        return Outcome("busy", str(e))
    except AgentxError as e:
        return Outcome("refused", str(e))
    except MemoryError:
        return Outcome("failed", "the import ran out of memory")
    return Outcome("stored", point_id=done.point_id, new=done.new)


def _child() -> None:
    from dataclasses import asdict

    from agentx.errors import AgentxError
    from agentx.results.db import DatabaseBusy, connect

    request = json.loads(sys.stdin.read())
    try:
        engine = connect(request["url"])
    except AgentxError as e:
        outcome = Outcome("busy" if isinstance(e, DatabaseBusy) else "failed", str(e))
    else:
        outcome = _import(engine, Path(request["folder"]))
        engine.dispose()
    print(json.dumps(asdict(outcome)))


if __name__ == "__main__":
    _child()
