"""`bench --model wrong-model` stops after the first few refusals with its hint (it sent 1,601
requests, every one refused with 404, in 5 s before printing the hint); the folder is a finished
NOT VALID run, importable as the failed point it is."""

import json
import subprocess
import sys

from agentx.engine.launch import sim_server
from tests.conftest import WEKA


def test_wrong_model_stops_early_with_the_hint(tmp_path):
    out = tmp_path / "run"
    with sim_server("--speed", "20") as url:
        res = subprocess.run([sys.executable, "-m", "agentx.cli", "bench", "--url", url, "--traces", str(WEKA),
                              "--model", "wrong-model", "--concurrency", "16", "--duration", "120", "--clock-scale",
                              "20", "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert res.returncode == 3, res.stderr  # NOT VALID
    said = " ".join(res.stdout.split())
    assert "hint: the first 8 requests all got HTTP 404" in said and "--model" in said, said
    records = (out / "records.jsonl").read_text().splitlines()
    assert 8 <= len(records) < 60  # the ones in flight when it stopped, not the whole run
    run = json.loads((out / "run.json").read_text())
    assert run["stopped"].startswith("the first 8 requests all got HTTP 404")
    result = json.loads((out / "result.json").read_text())
    assert not result["validity"]["valid"] and result["hints"] == [run["stopped"]]
