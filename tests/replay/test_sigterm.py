"""A bench stopped by SIGTERM (a job scheduler, `timeout`, `kill`) leaves its run folder saying so:
run.json "status": "interrupted" (it kept "running", as if the run were still going)."""

import json
import signal
import subprocess
import sys
import time

from agentx.engine.launch import sim_server
from tests.conftest import WEKA


def test_sigterm_leaves_the_run_interrupted(tmp_path):
    out = tmp_path / "run"
    with sim_server("--speed", "20") as url:
        proc = subprocess.Popen([sys.executable, "-m", "agentx.cli", "bench", "--url", url, "--traces", str(WEKA),
                                 "--concurrency", "2", "--duration", "600", "--clock-scale", "20", "--out", str(out)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 120
        while not ((out / "records.jsonl").exists() and (out / "records.jsonl").stat().st_size > 0):
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.poll() else "slow"
            time.sleep(0.2)
        info = json.loads((out / "run.json").read_text())
        assert info["status"] == "running"
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
    info = json.loads((out / "run.json").read_text())
    assert info["status"] == "interrupted" and info["finished"] is False
    assert proc.returncode != 0
