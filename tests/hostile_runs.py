"""Running the hostile cases of tests/hostile_cases.py and classifying each outcome:

- refused: a one-line AgentxError (or a 4xx answer) and nothing stored, no file left behind;
- accepted: the input was taken (counted apart: a hostile input should not be, a benign variant may);
- defect: a traceback, a multi-line error, a 5xx, a hang (over `timeout_s`), a partial store or a
  file left in the upload folder.
"""

from __future__ import annotations

import shutil
import signal
import tempfile
from collections import Counter
from contextlib import contextmanager
from pathlib import Path
from typing import Callable

from sqlalchemy import func, select

from agentx.errors import AgentxError
from agentx.results.schema import conversations, datasets, deployments, point_blobs, points, sweeps


class Hang(Exception):
    pass


@contextmanager
def deadline(seconds: int):
    def fire(*_):
        raise Hang()
    old = signal.signal(signal.SIGALRM, fire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def db_counts(engine) -> tuple:
    with engine.connect() as conn:
        return tuple(conn.execute(select(func.count()).select_from(t)).scalar()
                     for t in (points, deployments, datasets, conversations, point_blobs, sweeps))


def classify(call: Callable[[], object], engine=None, timeout_s: int = 60) -> tuple[str, str]:
    """(outcome, detail) of one call: refused / accepted / defect."""
    before = db_counts(engine) if engine is not None else None
    try:
        with deadline(timeout_s):
            call()
    except Hang:
        return "defect", "hang"
    except AgentxError as e:
        if "\n" in str(e):
            return "defect", f"multi-line error: {str(e)[:200]!r}"
        if engine is not None and db_counts(engine) != before:
            return "defect", f"partial store: {e}"
        return "refused", str(e)
    except Exception as e:  # noqa: BLE001 - a traceback is what this counts
        return "defect", f"{type(e).__name__}: {str(e)[:200]}"
    return "accepted", ""


def run_cases(cases, call: Callable[[Path], object], engine=None, timeout_s: int = 60) -> list[tuple[str, str, str]]:
    """(case, outcome, detail) per case, each made in a fresh temp folder."""
    out = []
    for name, make in cases:
        folder = Path(tempfile.mkdtemp(prefix="hostile-"))
        try:
            target = make(folder)
            outcome, detail = classify(lambda: call(target), engine, timeout_s)
            out.append((name, outcome, detail))
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    return out


def upload_files(folder: Path) -> list[tuple[str, tuple[str, bytes]]] | None:
    """A run folder's files as an upload, or None when one of them is not a regular file."""
    from agentx.results.api import UPLOAD_FILES

    files = []
    for name in UPLOAD_FILES:
        path = folder / name
        if path.is_symlink() or (path.exists() and not path.is_file()):
            return None
        if path.exists():
            files.append(("files", (name, path.read_bytes())))
    return files


def tally(results: list[tuple[str, str, str]]) -> Counter:
    return Counter(outcome for _, outcome, _ in results)


HOSTILE_IDS = ["0", "-1", "2147483648", "9223372036854775808", "99999999999999999999", "abc", "1e5", "%00", "1.5"]
ID_ROUTES = ["/points/{}", "/points/{}/parts/timeline", "/points/1/flames/{}", "/points/{}/flames/0", "/datasets/{}",
             "/conversations/{}", "/api/v1/points/{}", "/api/v1/points/{}/series", "/api/v1/points/{}/timeline",
             "/api/v1/points/{}/inferencex", "/api/v1/datasets/{}/conversations", "/api/v1/conversations/{}",
             "/?page={}", "/api/v1/points?limit={}", "/api/v1/points?offset={}"]


def multipart(files: list) -> tuple[bytes, str]:
    boundary = "agentx-hostile-boundary"
    parts = [b"--%s\r\nContent-Disposition: form-data; name=\"%s\"; filename=\"%s\"\r\n"
             b"Content-Type: application/octet-stream\r\n\r\n%s\r\n" % (boundary.encode(), field.encode(),
                                                                          name.encode(), data)
             for field, (name, data) in files]
    return b"".join(parts) + b"--%s--\r\n" % boundary.encode(), f"multipart/form-data; boundary={boundary}"


def _stored_is_strict(engine) -> bool:
    """Every stored point's JSON is standard (no NaN / Infinity) and its metric columns finite."""
    import json
    import math

    from agentx.results.schema import METRIC_COLUMNS

    with engine.connect() as conn:
        for row in conn.execute(select(points)):
            for text in (row.settings, row.result):
                if text is not None:
                    json.loads(text, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
            if any(v is not None and not math.isfinite(v) for v in (getattr(row, c) for c in METRIC_COLUMNS)):
                return False
    return True
