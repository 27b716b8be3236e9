"""`agentx sweep` end to end on the simulated engine: `sim:` and `command:` targets, a deployment
whose command exits at once, resuming after the sweep is killed, recipe errors naming the key."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest
from sqlalchemy import select

from agentx.errors import AgentxError
from agentx.results.db import connect
from agentx.results.recipe import load_recipe
from agentx.results.schema import deployments, points, sweeps

PY = sys.executable


def sweep_cli(recipe: Path, db: str, out: Path, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([PY, "-m", "agentx.cli", "sweep", str(recipe), "--db", db, "--out", str(out)],
                          capture_output=True, text=True, timeout=600, **kw)


def stored(db: str) -> list[dict]:
    engine = connect(db)
    with engine.connect() as conn:
        q = select(points, deployments.c.precision).join(deployments, points.c.deployment_id == deployments.c.id)
        return [dict(r._mapping) for r in conn.execute(q.order_by(points.c.id))]


def _running(p: psutil.Process) -> bool:
    try:
        return p.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text))
    return path


def test_sim_and_command_targets_and_a_failing_deployment(tmp_path):
    recipe = write(tmp_path / "recipe.yaml", f"""
        name: e2e
        duration: 60
        concurrency: [2, 4]
        bench: {{warmup_requests_per_lane: 2, grace: 10}}
        deployments:
          - name: sim-bf16
            sim: {{speed: 50}}
            labels: {{precision: bf16, parallelism: tp8}}
          - name: exits
            command: "exit 3  # {{port}}"
          - name: cmd-fp8
            command: "{PY} -m agentx.cli sim serve --port {{port}} --speed 50 --precision fp8"
            clock_scale: 50
            labels: {{hardware: H200, gpus: 8, engine: agentx-sim, precision: fp8}}
        """)
    db, out = f"sqlite:///{tmp_path / 'r.db'}", tmp_path / "out"
    res = sweep_cli(recipe, db, out)
    assert res.returncode == 0, res.stderr
    assert "exits: failed: deployment exits: the server command exited with status 3" in " ".join(res.stdout.split())
    rows = stored(db)
    ok = [r for r in rows if r["status"] == "ok"]
    assert [(r["precision"], r["concurrency"]) for r in ok] == [("bf16", 2), ("bf16", 4), ("fp8", 2), ("fp8", 4)]
    assert all(r["sweep_id"] == 1 and r["fingerprint"] and r["tput_per_gpu"] > 0 for r in ok)
    failed = [r for r in rows if r["status"] == "failed"]
    assert [r["concurrency"] for r in failed] == [2, 4] and all("status 3" in r["failure"] for r in failed)
    # labels from the recipe are in the stored result and in the run folder's result.json
    result = json.loads((out / "sim-bf16" / "c2" / "result.json").read_text())
    assert result["identity"]["parallelism"] == "tp8" and json.loads(ok[0]["result"]) == result
    assert (out / "cmd-fp8" / "server.log").read_text().startswith("# agentx sweep:")
    assert (out / "exits" / "server.log").exists()
    # at its end: a table of every point (DEPLOYMENT/cN) and the sweep's report
    text = " ".join(res.stdout.split())
    assert all(f"{d}/c{n}" in text for d in ("sim-bf16", "cmd-fp8") for n in (2, 4))
    assert f"HTML report: {out / 'report.html'}" in text and (out / "report.html").exists()
    with connect(db).connect() as conn:
        assert conn.execute(select(sweeps.c.status)).scalar() == "partial"
    # a second run stores nothing new for the points that succeeded
    again = sweep_cli(recipe, db, out)
    assert "sim-bf16: every point is stored already" in again.stdout
    assert "cmd-fp8: every point is stored already" in again.stdout
    assert len([r for r in stored(db) if r["status"] == "ok"]) == 4


def test_resumed_after_the_sweep_is_killed(tmp_path):
    recipe = write(tmp_path / "recipe.yaml", """
        name: resume
        duration: 300
        concurrency: [2, 3]
        bench: {warmup_requests_per_lane: 2, grace: 10}
        deployments:
          - name: sim
            sim: {speed: 50}
        """)
    db, out = f"sqlite:///{tmp_path / 'r.db'}", tmp_path / "out"
    cmd = [PY, "-m", "agentx.cli", "sweep", str(recipe), "--db", db, "--out", str(out)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        records = out / "sim" / "c3" / "records.jsonl"
        while time.monotonic() < deadline:
            if records.exists() and records.read_bytes().count(b'"phase":"profile"') >= 3:
                break
            time.sleep(0.1)
        else:
            pytest.fail("the second point never started profiling")
        children = psutil.Process(proc.pid).children(recursive=True)
        assert children  # the sim server
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    _, alive = psutil.wait_procs(children, timeout=15)
    alive = [p for p in alive if _running(p)]  # a zombie is dead, only not reaped (its parent was killed)
    for p in alive:  # should not happen: the server dies with the sweep
        p.kill()
    assert not alive, "the server outlived the killed sweep"
    first = stored(db)
    assert [(r["concurrency"], r["status"]) for r in first] == [(2, "ok")]
    res = sweep_cli(recipe, db, out)
    assert res.returncode == 0, res.stderr
    assert "c3 was interrupted" in res.stdout
    rows = stored(db)
    assert [(r["concurrency"], r["status"]) for r in rows] == [(2, "ok"), (3, "ok")]
    assert rows[0]["id"] == first[0]["id"]  # the stored point was not run again
    assert len(list((out / "sim" / ".interrupted").iterdir())) == 1
    # the sweep folder imports as the same two points (the interrupted attempt is left out)
    imported = subprocess.run([PY, "-m", "agentx.cli", "db", "import", str(out), "--db", db], capture_output=True,
                              text=True, timeout=120)
    assert imported.returncode == 0 and imported.stdout.count("already stored") == 2


HEAD = "name: x\nduration: 1\nconcurrency: [1]\n"


@pytest.mark.parametrize("body, message", [
    (HEAD + "deployments: [{name: a}]\n", "want a target: url, command or sim"),
    (HEAD + "deployments: [{name: a, command: x, sim: {}}]\n",
     "want one target of url, command or sim, got command and sim"),
    (HEAD + "deployments: [{name: a, url: 'http://u', colour: red}]\n", "deployments[0].colour: unknown key"),
    ("name: x\nduration: 1\nconcurrency: [one]\ndeployments: [{name: a, url: 'http://u'}]\n",
     "concurrency[0]: Expected `int`, got `str`"),
    (HEAD + "bench: {warp: 9}\ndeployments: [{name: a, url: 'http://u'}]\n", "bench.warp: unknown key"),
    (HEAD + "deployments: [{name: a, url: 'http://u'}, {name: a, url: 'http://v'}]\n",
     "deployments[1] (a): name: used twice"),
    ("name: [x\n", "not YAML"),
    # hostile recipes: each refused with the recipe's key, before anything runs or is stored
    (HEAD.replace("[1]", "[1e12]") + "deployments: [{name: a, url: 'http://u'}]\n", "concurrency[0]: Expected `int`"),
    (HEAD.replace("[1]", "[1000000000000]") + "deployments: [{name: a, url: 'http://u'}]\n",
     "concurrency[0]: Expected `int` <= 100000"),
    (HEAD.replace("duration: 1", "duration: .nan") + "deployments: [{name: a, url: 'http://u'}]\n", "duration:"),
    (HEAD.replace("duration: 1", "duration: .inf") + "deployments: [{name: a, url: 'http://u'}]\n", "duration:"),
    (HEAD.replace("duration: 1", "duration: 1.0e+308") + "deployments: [{name: a, url: 'http://u'}]\n",
     "duration: Expected `float` <= 1000000.0"),
    (HEAD + "deployments: [{name: a, url: 'http://u', clock_scale: -1}]\n", "deployments[0].clock_scale"),
    (HEAD + "deployments: [{name: " + "d" * 300 + ", url: 'http://u'}]\n", "deployments[0].name"),
    (HEAD + "deployments: [{name: \"a\\0b\", url: 'http://u'}]\n", "deployments[0].name"),
    (HEAD.replace("name: x", "name: ../../../../escaped") + "deployments: [{name: a, url: 'http://u'}]\n",
     "name: Expected `str` matching regex"),
    (HEAD + "bench: {grace: soon}\ndeployments: [{name: a, url: 'http://u'}]\n", "bench.grace: Expected `float"),
    (HEAD + "bench: {token_scale: 0}\ndeployments: [{name: a, url: 'http://u'}]\n", "bench.token_scale: must be >= 1"),
    (HEAD + "deployments: [{name: a, command: 'vllm serve m'}]\n", "deployments[0] (a): command: want {port}"),
    (HEAD + "dataset: {max_context: lots}\ndeployments: [{name: a, url: 'http://u'}]\n",
     "dataset.max_context: expected a token count"),
    (HEAD + "deployments: [{name: a, sim: {gpus: eight}}]\n", "sim.gpus: want a number"),
    ("a: &x [1]\nb: *x\n", "YAML aliases"),
    ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
])
def test_recipe_errors_name_the_key(tmp_path, body, message):
    path = tmp_path / "r.yaml"
    path.write_text(body)
    with pytest.raises(AgentxError) as e:
        load_recipe(path)
    assert message in str(e.value) and str(path) in str(e.value) and "--" not in str(e.value)


def test_a_binary_recipe_and_a_refused_sweep_store_nothing(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_bytes(b"\xff\xfe\x00garbage\x80")
    with pytest.raises(AgentxError, match="not UTF-8 text"):
        load_recipe(path)
    path.write_text(HEAD + "bench: {grace: soon}\ndeployments: [{name: a, url: 'http://u'}]\n")
    db = f"sqlite:///{tmp_path / 'r.db'}"
    res = sweep_cli(path, db, tmp_path / "out")
    assert res.returncode == 2 and "bench.grace" in res.stderr and "Traceback" not in res.stderr
    assert stored(db) == [] and not (tmp_path / "out").exists()
    from sqlalchemy import create_engine, text
    with create_engine(db).connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM sweeps")).scalar() == 0


def test_unhealthy_url_target_marks_points_failed(tmp_path):
    recipe = write(tmp_path / "recipe.yaml", """
        name: gone
        duration: 10
        concurrency: [1]
        deployments:
          - name: nothing-there
            url: http://127.0.0.1:9
        """)
    db = f"sqlite:///{tmp_path / 'r.db'}"
    res = sweep_cli(recipe, db, tmp_path / "out")
    assert res.returncode == 0, res.stderr
    (row,) = stored(db)
    assert row["status"] == "failed" and "is not healthy" in row["failure"]


def test_the_documented_recipe_is_valid(tmp_path):
    readme = (Path(__file__).resolve().parents[2] / "docs" / "results-db.md").read_text()
    block = readme.split("```yaml\n", 1)[1].split("```", 1)[0]
    recipe = load_recipe(write(tmp_path / "readme.yaml", block))
    assert [d.kind for d in recipe.deployments] == ["sim", "command", "url"]


def test_bench_settings_by_name(tmp_path):
    recipe = load_recipe(write(tmp_path / "r.yaml", """
        name: x
        duration: 1
        concurrency: [1]
        bench: {token_range: [1000, 2000], wire: chat, grace: 5}
        deployments: [{name: a, url: "http://u"}]
        """))
    assert recipe.bench["token_range"] == [1000, 2000]
