"""`agentx db import`'s outcomes (issue #46): a batch that skipped anything exits 2 with a summary
line; a result.json that is a symlink loop is refused by name; a re-imported folder that was
edited says it differs from the stored point; a Ctrl-C in the first seconds is one line, never a
traceback, and leaves no half-stored point."""

import json
import shutil
import signal
import sqlite3
import subprocess
import sys
import time

PY = sys.executable
# `python -m agentx.cli` once the interpreter is up: it says so on stdout first (a Ctrl-C inside
# CPython's own start-up, before a line of agentx runs, is CPython's; on a loaded machine that
# start-up took longer than the first delay below). Ctrl-C is Python's KeyboardInterrupt again first:
# a suite started in the background by a non-interactive shell (`nohup ... &`) hands its children
# SIGINT ignored, and every import then ran to its end
UP = ("import runpy, signal; signal.signal(signal.SIGINT, signal.default_int_handler); print('up', flush=True); "
      "runpy.run_module('agentx.cli', run_name='__main__', alter_sys=True)")


def _import(*args):
    return subprocess.run([PY, "-m", "agentx.cli", "db", "import", *map(str, args)], capture_output=True, text=True,
                          timeout=120)


def test_a_batch_that_skipped_a_folder_exits_2_with_a_summary_line(sweep_dir, tmp_path):
    runs = tmp_path / "runs"
    for name in ("ok", "killed", "loop"):
        shutil.copytree(sweep_dir / "c2", runs / name)
    (runs / "killed" / "result.json").unlink()
    (runs / "loop" / "result.json").unlink()
    (runs / "loop" / "result.json").symlink_to("result.json")
    res = _import(runs, "--db", tmp_path / "r.db")
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert res.stdout == f"{runs / 'ok'}: stored as point 1\n"
    assert res.stderr.splitlines() == [
        f"skipped {runs / 'killed'}: incomplete, no result.json (a killed run?): `agentx report {runs / 'killed'}` "
        f"writes it",
        f"{runs / 'loop'}: refused (nothing stored): {runs / 'loop' / 'result.json'}: a symlink loop, want a file",
        "error: imported 1 (1 new, 0 already stored), skipped 2: 1 incomplete, 1 refused"]
    res = _import(runs / "ok", sweep_dir / "c6", "--db", tmp_path / "r.db")  # nothing skipped: exit 0, a summary
    assert res.returncode == 0 and res.stderr == "imported 2 (1 new, 1 already stored), skipped 0\n", res.stderr


def test_reimporting_an_edited_folder_says_it_differs(sweep_dir, tmp_path):
    db = tmp_path / "r.db"
    assert _import(sweep_dir / "c2", "--db", db).returncode == 0
    edited = tmp_path / "c2"
    shutil.copytree(sweep_dir / "c2", edited)
    result = json.loads((edited / "result.json").read_text())
    result["request_metrics"]["throughput"]["total_tok_s"] *= 2
    (edited / "result.json").write_text(json.dumps(result))
    res = _import(edited, "--db", db)
    assert res.returncode == 2, res.stderr
    assert res.stderr.splitlines() == [
        f"{edited}: already stored as point 1, but the folder differs from the stored one (result.json fields "
        f"request_metrics); the stored point is kept (the run id is the same)",
        "error: imported 0 (0 new, 0 already stored), skipped 1: 1 differs from the stored point"]
    same = _import(sweep_dir / "c2", "--db", db)  # the folder as it was stored: no word of a difference
    assert same.returncode == 0 and same.stdout == f"{sweep_dir / 'c2'}: already stored as point 1\n"


def _points(db):
    if not db.exists():
        return None
    conn = sqlite3.connect(db)
    try:
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not {"points", "point_blobs"} <= tables:  # interrupted while the schema was being made
            return None
        return conn.execute("SELECT p.id, count(b.kind) FROM points p LEFT JOIN point_blobs b ON b.point_id = p.id "
                            "GROUP BY p.id ORDER BY p.id").fetchall()
    finally:
        conn.close()


def test_ctrl_c_in_the_first_seconds_is_one_line_and_stores_no_half_point(sweep_dir, tmp_path):
    """SIGINT at moments over the command's first seconds (loading, opening the database,
    reading and storing the folders): one line (or the finished import), no traceback, and each
    stored point whole (its chart blobs with it); the import run again completes the batch."""
    blobs, interrupted = None, 0
    clean = subprocess.Popen([PY, "-c", UP, "db", "import", str(sweep_dir), "--db", str(tmp_path / "clean.db")],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert clean.stdout.readline() == "up\n"
    t0 = time.monotonic()
    clean.communicate(timeout=120)
    took = time.monotonic() - t0  # the moments are shares of this host's import, so a quiet and a busy host both cut it
    # (near its end too: a Ctrl-C landing as the last folder is stored, or as the lines are said, loses none)
    # a host whose load falls after the clean run imports several times faster: the moments then go on,
    # halving, until three landed before the import ended
    shares = [0.05, 0.15, 0.3, 0.45, 0.6, 0.75, 0.85, 0.95, 1.5] + [0.05 / 2 ** k for k in range(1, 7)]
    for i, delay in enumerate(took * f for f in shares):
        if i >= 9 and interrupted >= 3:
            break
        db = tmp_path / f"r{i}.db"
        proc = subprocess.Popen([PY, "-c", UP, "db", "import", str(sweep_dir), "--db", str(db)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert proc.stdout.readline() == "up\n"
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
        assert "Traceback" not in err and "KeyboardInterrupt" not in err, (delay, err)
        stored = _points(db) or []
        assert out.count("stored as point") == len(stored), (delay, out, stored)
        if proc.returncode == 0 or err.startswith("imported 2 "):  # finished (a late Ctrl-C lands at its exit)
            assert len(stored) == 2 and proc.returncode in (0, 130, -signal.SIGINT), (delay, out, err)
        else:
            assert proc.returncode in (130, -signal.SIGINT) and len(err.strip().splitlines()) == 1, (delay, err)
            assert err.startswith("interrupted (Ctrl-C)"), (delay, err)
            interrupted += 1
        for _, n in stored:
            blobs = n if blobs is None else blobs
            assert n == blobs and n > 0, (delay, stored)  # a point is stored with all of its blobs or not at all
        again = _import(sweep_dir, "--db", db)
        points = _points(db)
        blobs = points[0][1] if blobs is None else blobs
        assert again.returncode == 0 and points == [(1, blobs), (2, blobs)], (delay, again.stderr, points)
    assert interrupted >= 3  # the moments before the import ended were interrupted (not all finished)
