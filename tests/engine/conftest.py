"""Shared by the engine tests: a sim server served in-process, on this test's event loop."""

import pytest
from aiohttp import web

from agentx.engine.config import ServeConfig
from agentx.engine.serve.app import SimServer

IN_PROCESS_SPEED = 2.0  # modeled seconds per wall second of the in-process sim


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture
async def sim_in_process(tmp_path):
    """(the server, its port): a `SimServer` at speed 2 with a truth log (tmp_path / "truth.jsonl"),
    served on 127.0.0.1 by the test's own event loop, so a `time.sleep` in the test holds the
    whole loop (no timer, no socket, no engine step). Tests using it are `pytest.mark.anyio`."""
    server = SimServer(ServeConfig(speed=IN_PROCESS_SPEED, truth_log=str(tmp_path / "truth.jsonl")))
    runner = web.AppRunner(server.app())
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield server, site._server.sockets[0].getsockname()[1]
    finally:
        await runner.cleanup()
