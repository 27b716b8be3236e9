"""Frontier integrity with two real sims (issue #24): the same traces at 3 lanes against a clean
`agentx sim serve` and one with silent KV corruption (`--fault-rate 0.5 --fault-kinds corrupt`),
both with `--probe-cache 6`, both imported. The corrupt point is NOT VALID (its probe found
answers that differ warm from cold), has a deployment of its own (the sim publishes its faults),
and is on no curve, in no "y at x" and listed apart with its reason; the clean one is on its
curve and answers "y at x" naming its configuration."""

import subprocess
import sys

from fastapi.testclient import TestClient

from agentx.engine.launch import sim_server
from agentx.results.api import create_app
from agentx.results.db import connect
from agentx.results.importer import import_paths
from tests.conftest import WEKA, valid_but_for_host_timing

SPEED = 10
V1 = "/api/v1"


def bench(url: str, out) -> None:
    cmd = [sys.executable, "-m", "agentx.cli", "bench", "--url", url, "--traces", str(WEKA), "--concurrency", "3",
           "--duration", "30", "--clock-scale", str(SPEED), "--gpus", "8", "--hardware", "H200", "--engine",
           "agentx-sim", "--warmup-requests-per-lane", "1", "--grace", "10", "--probe-cache", "6", "--out", str(out),
           "--allow-invalid", "--agreement", "0"]  # 30 s at 3 lanes: a tree or two; what counts here is the probe
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr


def test_a_corrupt_sim_never_wins_the_frontier(tmp_path):
    with sim_server("--speed", str(SPEED)) as url:
        bench(url, tmp_path / "clean")
    with sim_server("--speed", str(SPEED), "--fault-rate", "0.5", "--fault-kinds", "corrupt", "--seed", "1") as url:
        bench(url, tmp_path / "corrupt")
    engine = connect(f"sqlite:///{tmp_path / 'r.db'}")
    clean_id, corrupt_id = (import_paths(engine, [tmp_path / name])[0].point_id for name in ("clean", "corrupt"))
    api = TestClient(create_app(engine))
    clean, corrupt = (api.get(f"{V1}/points/{i}").json() for i in (clean_id, corrupt_id))
    assert any(r.startswith("the cache probe found") for r in corrupt["result"]["validity"]["reasons"])
    assert "faults=corrupt@0.5" in corrupt["result"]["identity"]["engine_settings"]
    assert clean["deployment_id"] != corrupt["deployment_id"]  # the faults are part of the deployment key
    assert valid_but_for_host_timing(clean["result"]), clean["result"]["validity"]["reasons"]

    body = api.get(f"{V1}/frontier").json()
    on = {p["id"] for c in body["curves"] for p in c["points"]}
    listed = {p["id"]: p["reasons"] for c in body["curves"] for p in c["invalid"]}
    assert corrupt_id not in on and any(r.startswith("the cache probe found") for r in listed[corrupt_id])
    x = clean["p90_e2e_norm_intvty"]
    answers = api.get(f"{V1}/frontier/interpolate", params={"at": x}).json()["curves"]
    assert all(corrupt_id not in a["point_ids"] for a in answers)
    if clean["valid"]:  # on a loaded host the clean run may be NOT VALID for its host timing alone
        assert clean_id in on and clean_id not in listed
        (answer,) = [a for a in answers if clean_id in a["point_ids"]]
        assert answer["value"] == clean["tput_per_gpu"] and not answer["interpolated"]
        assert answer["concurrency"] == [3] and answer["deployment_id"] == clean["deployment_id"]
        assert "8 GPUs" in answer["configuration"]
        cli = subprocess.run([sys.executable, "-m", "agentx.cli", "frontier", "--db", f"sqlite:///{tmp_path / 'r.db'}",
                              "--at", str(x)], capture_output=True, text=True, timeout=120)
        assert f"measured at c3 of deployment {clean['deployment_id']}" in " ".join(cli.stdout.split()), cli.stdout
    else:
        assert clean_id in listed
