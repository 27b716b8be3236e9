"""The results database beside other programs (issue #46): another program's SQLite file is
refused before agentx creates anything in it (unless --db-init); a database another program holds
locked is waited on, then one line (`db import`), or a 503 with Retry-After (an upload)."""

import sqlite3
import subprocess
import sys
from contextlib import contextmanager

import pytest
from fastapi.testclient import TestClient

from agentx.results.api import create_app
from agentx.results.db import DatabaseBusy, connect
from agentx.results.importer import import_run
from tests.hostile_runs import upload_files

HOLD_LOCK = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")  # the write lock, held until this program ends
conn.execute("CREATE TABLE IF NOT EXISTS other_program(x)")
print("locked", flush=True)
time.sleep(120)
"""


def _agentx(*args):
    return subprocess.run([sys.executable, "-m", "agentx.cli", *args], capture_output=True, text=True, timeout=120)


def _state(path):
    conn = sqlite3.connect(path)
    try:
        return (sorted(n for (n,) in conn.execute("SELECT name FROM sqlite_master")),
                conn.execute("PRAGMA journal_mode").fetchone()[0])
    finally:
        conn.close()


@pytest.fixture()
def other_program_db(tmp_path):
    path = tmp_path / "crm.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
    conn.execute("INSERT INTO customers (name) VALUES ('ada')")
    conn.commit()
    conn.close()
    return path


def test_another_programs_database_is_refused_and_left_as_it_was(other_program_db, sweep_dir):
    before = _state(other_program_db)
    for args in (("db", "points"), ("frontier",), ("db", "import", str(sweep_dir)), ("serve", "--port", "0")):
        res = _agentx(*args, "--db", str(other_program_db))
        assert res.returncode == 2 and "Traceback" not in res.stderr, (args, res.stderr)
        assert "not an agentx results database" in res.stderr and "customers" in res.stderr, res.stderr
        assert "--db-init" in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr
        assert _state(other_program_db) == before, args  # no table, no WAL mode
    res = _agentx("db", "import", str(sweep_dir), "--db", str(other_program_db), "--db-init")
    assert res.returncode == 0 and res.stdout.count("stored as point") == 2, res.stderr
    assert "customers" in _state(other_program_db)[0] and _agentx("db", "points", "--db", str(other_program_db)).returncode == 0


@contextmanager
def _locked_by_another_program(path):
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(path)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        yield
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()


def test_a_locked_database_is_one_line_for_an_import_and_a_503_for_an_upload(tmp_path, sweep_dir):
    url = f"sqlite:///{tmp_path / 'r.db'}"
    engine = connect(url, lock_timeout_s=0.5)
    app = create_app(engine, token="t", upload_dir=tmp_path / "uploads")
    with _locked_by_another_program(tmp_path / "r.db"):
        with pytest.raises(DatabaseBusy, match=r"the database is locked by another program \(waited 0.5 s\)"):
            import_run(engine, sweep_dir / "c2")
        with TestClient(app) as client:
            resp = client.post("/api/v1/runs", files=upload_files(sweep_dir / "c6"), headers={"Authorization": "Bearer t"})
        assert resp.status_code == 503 and resp.headers["Retry-After"].isdigit(), resp.text
        assert "locked by another program" in resp.json()["detail"]
    assert import_run(engine, sweep_dir / "c2").new  # the lock gone, it goes in
    assert not list((tmp_path / "uploads").iterdir())  # the refused upload freed
