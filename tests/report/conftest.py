"""A real short sweep on the simulated engine, shared by the report tests: in virtual time
(`agentx sim bench`), so its points are valid however loaded the machine is (over HTTP at a high
speed the host's work is modeled time, and the runs NOT VALID for their host error)."""

import subprocess
import sys

import pytest

from agentx.engine.config import Deployment, EngineConfig
from agentx.replay.settings import BenchSettings
from agentx.traces.load import load_sessions
from agentx.virtual.runner import sim_bench
from tests.conftest import WEKA

LEVELS = (2, 6)


@pytest.fixture(scope="session")
def sweep(tmp_path_factory):
    """A sweep folder with one run per concurrency (c2, c6) of the 8 x H200 default deployment."""
    out = tmp_path_factory.mktemp("report") / "sweep"
    sessions = load_sessions([WEKA], None)
    for n in LEVELS:
        sim_bench(BenchSettings.build(url="virtual", concurrency=n, duration=240, out=str(out / f"c{n}"), gpus=8,
                                      hardware="H200", dataset="weka sample", warmup_requests_per_lane=3,
                                      agreement=0),  # a few trees: no agreement asked (SPEC 3, "spread")
                  sessions, Deployment(EngineConfig()))
    return out


from tests.results.conftest import agentx_serve, replica_run  # noqa: E402,F401  (the fixture, shared with tests/results)


@pytest.fixture(scope="session")
def dashboard(sweep, tmp_path_factory):
    """`agentx serve --read-only` on a database holding the sweep; its URL."""
    db = str(tmp_path_factory.mktemp("dashboard") / "results.db")
    cli = [sys.executable, "-m", "agentx.cli"]
    subprocess.run([*cli, "db", "import", str(sweep), "--db", db], check=True, capture_output=True)
    with agentx_serve(db, "--read-only") as (url, _, _):
        yield url

