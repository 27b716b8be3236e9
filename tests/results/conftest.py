"""Fixtures of the results tests: a throwaway PostgreSQL 15 cluster, a database URL per backend,
and run folders from real short runs of `agentx bench` against the simulated engine."""

import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from contextlib import contextmanager
from itertools import count
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from agentx.engine.launch import sim_server
from tests.conftest import WEKA

PG_BIN = Path("/usr/lib/postgresql/15/bin")
SPEED = 50  # the sim runs of the tests here that need a real server


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def agentx_serve(db: str, *args: str, log=subprocess.DEVNULL):
    """`agentx serve --db DB ARGS` on a free loopback port, once it answers: (url, port, process);
    stopped on leaving."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "agentx.cli", "serve", "--db", db, "--port", str(port), *args],
                            stdout=log, stderr=log)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(url + "/api/v1/points", timeout=2).close()
                break
            except OSError:
                assert time.monotonic() < deadline and proc.poll() is None, "agentx serve did not start"
                time.sleep(0.2)
        yield url, port, proc
    finally:
        proc.terminate()
        proc.wait(10)


_server = None  # the URL of the running cluster, while the `postgres` fixture holds it


def _postgres_url() -> str:
    assert _server is not None, "request the postgres fixture first"
    return _server


@pytest.fixture(scope="session")
def postgres():
    """The URL of a PostgreSQL 15 cluster in a temp folder (as the postgres user when root), stopped after."""
    if not (PG_BIN / "initdb").exists():
        pytest.skip(f"PostgreSQL 15 is not installed ({PG_BIN})")
    folder = Path(tempfile.mkdtemp(prefix="agentx-pg-"))
    as_user = []
    if os.geteuid() == 0:
        pw = pwd.getpwnam("postgres")
        os.chown(folder, pw.pw_uid, pw.pw_gid)
        as_user = ["runuser", "-u", "postgres", "--"]
    data, port = folder / "data", free_port()

    def run(*cmd):
        subprocess.run([*as_user, *map(str, cmd)], check=True, capture_output=True, timeout=120)

    run(PG_BIN / "initdb", "-A", "trust", "-U", "postgres", "-D", data)
    run(PG_BIN / "pg_ctl", "-D", data, "-l", folder / "log", "-w", "-o",
        f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c fsync=off", "start")
    global _server
    _server = f"postgresql://postgres@127.0.0.1:{port}"
    try:
        yield _server
    finally:
        _server = None
        run(PG_BIN / "pg_ctl", "-D", data, "-m", "fast", "-w", "stop")
        shutil.rmtree(folder, ignore_errors=True)


_databases = count()


@pytest.fixture(scope="session")
def new_database(tmp_path_factory):
    """A factory of fresh, empty results database URLs: new_database("sqlite" | "postgresql")."""
    def create(kind: str) -> str:
        if kind == "sqlite":
            return f"sqlite:///{tmp_path_factory.mktemp('db') / 'results.db'}"
        server = _postgres_url()
        name = f"agentx_{next(_databases)}"
        admin = create_engine(server.replace("postgresql://", "postgresql+psycopg://") + "/postgres",
                              isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.execute(text(f"CREATE DATABASE {name}"))
        admin.dispose()
        return f"{server}/{name}"

    return create


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request, new_database):
    """A fresh, empty results database on each backend."""
    if request.param == "postgresql":
        request.getfixturevalue("postgres")
    return new_database(request.param)


@pytest.fixture(scope="session")
def sweep_dir(tmp_path_factory) -> Path:
    """A folder of two real runs (concurrency 2 and 6) of the bundled traces on the sim, in
    virtual time (`agentx sim bench`): exact modeled figures, so valid points however loaded the
    machine is (over HTTP at speed 50 every millisecond of host work would be 50 modeled ones,
    and the runs NOT VALID for their host error: SPEC section 3)."""
    out = tmp_path_factory.mktemp("runs") / "sweep"
    cmd = [sys.executable, "-m", "agentx.cli", "sim", "bench", "--traces", str(WEKA), "--concurrency", "2,6",
           "--duration", "150", "--warmup-requests-per-lane", "3", "--out", str(out),
           "--agreement", "0"]  # 2 and 6 lanes: a few trees; these points ask no agreement (their spread is stored)
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    return out


@pytest.fixture(scope="session")
def replica_run(tmp_path_factory) -> Path:
    """A real run against the sim with two replicas and a CPU offload tier (per-engine KV gauges),
    its 16 modeled GPUs' power read from the sim's DCGM series."""
    out, speed = tmp_path_factory.mktemp("replicas") / "c8", 20
    with sim_server("--speed", str(speed), "--replicas", "2", "--cpu-offload-gb", "200", "--gpu-memory-utilization",
                    "0.6", "--max-model-len", "200000") as url:
        cmd = [sys.executable, "-m", "agentx.cli", "bench", "--url", url, "--traces", str(WEKA), "--concurrency", "8",
               "--duration", "300", "--clock-scale", str(speed), "--gpus", "16", "--hardware", "H200", "--engine",
               "agentx-sim", "--warmup-requests-per-lane", "2", "--grace", "10", "--out", str(out),
               "--power", f"dcgm:{url}/metrics", "--allow-invalid"]  # NOT VALID for host timing: not what this tests
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        assert res.returncode == 0, res.stderr
    return out
