"""A real short sweep on the simulated engine (a server process), shared by the report tests."""

import pytest

from agentx.engine.launch import sim_server
from agentx.replay.driver import bench
from agentx.replay.settings import BenchSettings
from agentx.traces.load import load_sessions
from tests.conftest import WEKA

SPEED = 50
LEVELS = (2, 6)


@pytest.fixture(scope="session")
def sweep(tmp_path_factory):
    """A sweep folder with one run per concurrency (c2, c6), against one sim server, its modeled
    GPU power read from the sim's DCGM series (bench --power)."""
    out = tmp_path_factory.mktemp("report") / "sweep"
    sessions = load_sessions([WEKA], None)
    with sim_server("--speed", str(SPEED)) as url:
        for n in LEVELS:
            bench(BenchSettings.build(url=url, concurrency=n, duration=240, out=str(out / f"c{n}"), clock_scale=SPEED,
                                      gpus=8, hardware="H200", engine="agentx-sim", dataset="weka sample",
                                      warmup_requests_per_lane=3, grace=10, power=f"dcgm:{url}/metrics"), sessions)
    return out


from tests.results.conftest import replica_run  # noqa: E402,F401  (the fixture, shared with tests/results)
