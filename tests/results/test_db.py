"""The results database on SQLite and PostgreSQL: migrations, importing real run folders, the
precomputed chart data, and errors on bad input."""

import hashlib
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
from sqlalchemy import select, text

from agentx.errors import AgentxError
from agentx.results.db import SCHEMA_VERSION, connect, tables
from agentx.results.importer import import_paths, import_run
from agentx.results.runfolder import read_columns
from agentx.results.timeline import build_conversations
from agentx.results.points import deployment_key, unpack
from agentx.results.schema import (DEPLOYMENT_LABELS, POWER_COLUMNS, conversations, datasets, deployments,
                                   point_blobs, points)
from tests.conftest import WEKA


def blob(engine, point_id, kind):
    with engine.connect() as conn:
        return unpack(conn.execute(select(point_blobs.c.data).where(
            (point_blobs.c.point_id == point_id) & (point_blobs.c.kind == kind))).scalar_one())


def test_migrations_apply_once(db_url):
    engine = connect(db_url)
    assert {"deployments", "sweeps", "points", "point_blobs", "datasets", "conversations",
            "agentx_schema"} <= tables(engine)
    connect(db_url)  # a second open applies nothing
    with engine.connect() as conn:
        assert conn.execute(text("SELECT version FROM agentx_schema ORDER BY version")).scalars().all() == list(range(1, SCHEMA_VERSION + 1))


def test_a_version_1_database_gets_engine_settings(db_url):
    engine = connect(db_url)
    with engine.begin() as conn:  # back to version 1's deployments table
        conn.execute(text("ALTER TABLE deployments DROP COLUMN engine_settings"))
        conn.execute(text("DELETE FROM agentx_schema WHERE version >= 2"))
    engine = connect(db_url)
    with engine.connect() as conn:
        assert conn.execute(text("SELECT version FROM agentx_schema ORDER BY version")).scalars().all() == [1, 2, 3, 4]
        assert conn.execute(select(deployments.c.engine_settings)).all() == []


def test_a_version_2_database_gets_the_power_columns(db_url):
    engine = connect(db_url)
    with engine.begin() as conn:  # back to version 2's points table
        for name in (*POWER_COLUMNS, "power_valid"):
            conn.execute(text(f"ALTER TABLE points DROP COLUMN {name}"))
        conn.execute(text("DELETE FROM agentx_schema WHERE version >= 3"))
    engine = connect(db_url)
    with engine.connect() as conn:
        assert conn.execute(text("SELECT version FROM agentx_schema ORDER BY version")).scalars().all() == [1, 2, 3, 4]
        assert conn.execute(select(points.c.power_valid, *[points.c[n] for n in POWER_COLUMNS])).all() == []


def test_a_version_3_database_gets_conversation_runs(db_url, sweep_dir):
    engine = connect(db_url)
    import_paths(engine, [sweep_dir / "c2"])
    with engine.begin() as conn:  # back to version 3's conversations table
        conn.execute(text("ALTER TABLE conversations DROP COLUMN runs"))
        conn.execute(text("DELETE FROM agentx_schema WHERE version = 4"))
    engine = connect(db_url)
    with engine.connect() as conn:
        assert conn.execute(text("SELECT version FROM agentx_schema ORDER BY version")).scalars().all() == [1, 2, 3, 4]
        assert set(conn.execute(select(conversations.c.runs)).scalars()) == {1}  # each stored by one run


def test_deployment_keys_of_version_1_are_kept():
    """A label added later joins the key only when set: deployments stored before keep their key."""
    labels = {"model": "m", "hardware": "H200", "gpus": 8, "engine": "vllm", "router": None}
    old = hashlib.sha256(json.dumps([labels.get(k) for k in DEPLOYMENT_LABELS if k != "engine_settings"]).encode())
    assert deployment_key(labels) == old.hexdigest()
    assert deployment_key({**labels, "engine_settings": "gpu_memory_utilization=0.8"}) != old.hexdigest()


def test_import_sweep_folder(db_url, sweep_dir):
    engine = connect(db_url)
    done = import_paths(engine, [sweep_dir])
    assert [d.path.name for d in done] == ["c2", "c6"] and all(d.new for d in done)
    again = import_paths(engine, [sweep_dir / "c2"])
    assert not again[0].new and again[0].point_id == done[0].point_id
    with engine.connect() as conn:
        rows = [dict(r._mapping) for r in conn.execute(select(points).order_by(points.c.concurrency))]
        deps = conn.execute(select(deployments)).all()
        ds = conn.execute(select(datasets)).one()
        convs = conn.execute(select(conversations)).all()
    assert len(rows) == 2 and len(deps) == 1 and deps[0].hardware == "H200" and deps[0].gpus == 8
    for row in rows:
        result = json.loads((sweep_dir / f"c{row['concurrency']}" / "result.json").read_text())
        rm = result["request_metrics"]
        assert row["status"] == "ok" and row["simulated"] and row["valid"] == result["validity"]["valid"]
        assert row["tput_per_gpu"] == pytest.approx(rm["throughput"]["total_tok_s_per_gpu"])
        assert row["p90_e2e_norm_intvty"] == pytest.approx(rm["e2e_normalized_interactivity_tok_s"]["p90"])
        assert row["p90_ttft"] == pytest.approx(rm["ttft_s"]["p90"])
        # tokens per dollar and per MW from the SPEC §3 table (H200: 1.73 kW, $1.74 neocloud)
        assert row["tok_per_usd_neocloud"] == pytest.approx(row["tput_per_gpu"] * 3600 / 1.74)
        assert row["tok_s_per_mw"] == pytest.approx(row["tput_per_gpu"] * 1000 / 1.73)
        # measured power (bench --power): the result's figures, stored only as they are valid
        power = result["power"]
        assert row["power_valid"] is True and power["valid"]
        assert row["joules_per_output_token"] == pytest.approx(power["joules_per_output_token"])
        assert row["joules_per_total_token"] == pytest.approx(power["joules_per_total_token"])
        assert row["avg_power_w"] == pytest.approx(power["avg_w"]) and row["peak_power_w"] == pytest.approx(power["peak_w"])
        assert row["measured_tok_s_per_mw"] == pytest.approx(power["total_tok_s_per_mw"])
        assert json.loads(row["result"]) == result
    # a higher concurrency gives more throughput per GPU and less interactivity on the sim
    assert rows[1]["tput_per_gpu"] > rows[0]["tput_per_gpu"]
    assert ds.name == "bundled WEKA sample" or ds.name.endswith("weka")
    assert ds.conversations == len(convs) > 0
    tree = json.loads(convs[0].tree)
    turns = [t for s in tree["streams"] for t in s["turns"]]
    assert convs[0].turns == len(turns) and convs[0].input_tokens == sum(t[1] for t in turns)
    assert all(t[1] == t[2] + t[3] for t in turns)  # input = cached + uncached
    # over every run (issue #47): each session as the run that replayed most of it has it, and how many replayed it
    per_run = [{c["session"]: c for c in build_conversations(read_columns(sweep_dir / f"c{n}"))} for n in (2, 6)]
    for conv in convs:
        replays = [run[conv.session] for run in per_run if conv.session in run]
        assert conv.runs == len(replays) and conv.turns == max(c["turns"] for c in replays)
        best = next(c for c in replays if c["turns"] == conv.turns)  # the first of the most complete
        assert json.loads(conv.tree) == best["tree"]
    assert {c.runs for c in convs} == {1, 2}


def test_conversations_keep_the_most_complete_replay_of_every_run(db_url, sweep_dir):
    """Imported c6 first, then c2 (which replays more of some sessions): those are replaced by
    c2's replay, the others keep c6's (issue #47: the first run imported won)."""
    engine = connect(db_url)
    import_paths(engine, [sweep_dir / "c6"])
    import_paths(engine, [sweep_dir / "c2"])
    six, two = ({c["session"]: c for c in build_conversations(read_columns(sweep_dir / n))} for n in ("c6", "c2"))
    with engine.connect() as conn:
        convs = {c.session: c for c in conn.execute(select(conversations))}
    assert set(convs) == set(six) | set(two)
    replaced = [s for s in six if s in two and two[s]["turns"] > six[s]["turns"]]
    assert replaced
    for session, conv in convs.items():
        best = six[session] if session in six and (session not in two or six[session]["turns"] >= two[session]["turns"]) \
            else two[session]
        assert (conv.turns, json.loads(conv.tree), conv.runs) == (best["turns"], best["tree"],
                                                                  (session in six) + (session in two))


def test_precomputed_series_and_timeline_agree_with_the_records(db_url, sweep_dir):
    engine = connect(db_url)
    point = import_run(engine, sweep_dir / "c6").point_id
    cols = read_columns(sweep_dir / "c6")
    ok = np.array([e is None for e in cols["error"]])
    series = blob(engine, point, "series")
    assert series["step_s"] == 1  # one sample interval: 1 modeled second (a virtual-time run)
    assert sum(series["requests_done"]) == ok.sum()
    assert series["t"][1] - series["t"][0] == 1
    server = series["server"]
    assert max(v for v in server["kv_usage"] if v is not None) > 0
    assert {"local_compute", "local_cache_hit"} <= set(server["prompt_tokens_by_source"])
    hits = [v for v in server["prefix_hit_rate"] if v is not None]
    assert hits and all(0 <= v <= 1 for v in hits)
    assert "profile" in server["phase"] and "warmup" in server["phase"]
    for by in ("conversation", "lane"):
        tl = blob(engine, point, f"timeline_{by}")
        assert tl["n"] == len(cols["start"]) == len(tl["start"]) == len(tl["row"])
        assert max(tl["row"]) == len(tl["rows"]) - 1
        assert tl["start"][:5] == pytest.approx(cols["start"][:5], abs=1e-4)
        assert [tl["sessions"][i] for i in tl["session"]] == cols["session"]
    assert len(blob(engine, point, "timeline_lane")["rows"]) == 6
    hist = blob(engine, point, "histograms")
    assert hist["isl"]["n"] == json.loads((sweep_dir / "c6" / "result.json").read_text())["request_metrics"]["isl"]["n"]
    assert sum(hist["osl"]["counts"]) == hist["osl"]["n"]


def test_jsonl_and_parquet_read_alike(sweep_dir, tmp_path):
    copy = tmp_path / "c2"
    shutil.copytree(sweep_dir / "c2", copy)
    (copy / "records.parquet").unlink()
    a, b = read_columns(sweep_dir / "c2"), read_columns(copy)
    for name in a:
        same = np.array_equal(a[name], b[name], equal_nan=True) if isinstance(a[name], np.ndarray) else a[name] == b[name]
        assert same, name


def test_bad_run_folders_are_named(tmp_path, sweep_dir):
    engine = connect(f"sqlite:///{tmp_path / 'r.db'}")
    with pytest.raises(AgentxError, match="no run.json in it or below it"):
        import_paths(engine, [tmp_path])
    broken = tmp_path / "broken"
    shutil.copytree(sweep_dir / "c2", broken)
    (broken / "result.json").unlink()
    notes = []  # a killed run is incomplete: skipped with a note, the rest of a glob is stored
    assert import_paths(engine, [broken], lambda path, why: notes.append((path, why))) == []
    assert notes == [(broken, f"no result.json (a killed run?): `agentx report {broken}` writes it")]
    (broken / "result.json").write_text('{"schema_version": 1}')
    with pytest.raises(AgentxError, match="field 'identity' missing"):
        import_paths(engine, [broken])
    lines = (broken / "records.jsonl").read_bytes().split(b"\n")
    lines[1] = b"{not json"
    (broken / "records.jsonl").write_bytes(b"\n".join(lines))
    (broken / "records.parquet").unlink()
    with pytest.raises(AgentxError, match=r"records.jsonl: line 2"):
        read_columns(broken)


def test_cli_default_database_is_announced(tmp_path, sweep_dir):
    env = {**os.environ, "HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path / "data")}
    cmd = [sys.executable, "-m", "agentx.cli", "db", "import", str(sweep_dir)]
    first = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
    assert first.returncode == 0, first.stderr
    default = tmp_path / "data" / "agentx" / "results.db"
    assert f"creating {default}" in first.stderr and default.exists()
    assert "stored as point 1" in first.stdout and "stored as point 2" in first.stdout
    listed = subprocess.run([sys.executable, "-m", "agentx.cli", "db", "points", "--hardware", "H200"],
                            capture_output=True, text=True, env=env, timeout=120)
    assert listed.returncode == 0 and listed.stdout.count("agentx-sim") == 2, listed.stdout
    second = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
    assert "creating" not in second.stderr and "already stored as point 1" in second.stdout
    bad = subprocess.run([sys.executable, "-m", "agentx.cli", "db", "import", str(sweep_dir), "--db", "nosuch://x"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--db: cannot use 'nosuch://x'" in bad.stderr


def test_dataset_trace_stats_equal_the_cli(db_url, sweep_dir, tmp_path):
    """The dataset's digest stored at import holds the very figures `agentx trace stats --json` prints
    for the traces the runs replayed; a run folder without one leaves the summary empty, a broken
    one is named."""
    cli = subprocess.run([sys.executable, "-m", "agentx.cli", "trace", "stats", str(WEKA), "--json"],
                         capture_output=True, text=True, timeout=120, check=True)
    engine = connect(db_url)
    bare = tmp_path / "bare"
    shutil.copytree(sweep_dir / "c2", bare)
    (bare / "dataset.json").unlink()
    import_run(engine, bare)
    with engine.connect() as conn:
        assert conn.execute(select(datasets.c.summary)).scalar_one() is None
    assert [d.new for d in import_paths(engine, [sweep_dir])] == [False, True]  # c2 is the bare copy's run
    with engine.connect() as conn:
        digest = json.loads(conn.execute(select(datasets.c.summary)).scalar_one())
    assert digest["stats"] == json.loads(cli.stdout)
    per = digest["sessions"]
    assert len(per["id"]) == digest["stats"]["sessions"] == 14
    assert sum(per["requests"]) == digest["stats"]["requests"] == digest["isl"]["n"] + digest["isl"]["zeros"]
    assert sum(digest["osl"]["counts"]) == digest["osl"]["n"]
    assert sum(per["hit_tokens"]) / sum(per["isl_tokens"]) == pytest.approx(digest["stats"]["theoretical_hit_rate"])
    (bare / "dataset.json").write_text("{oops")
    with pytest.raises(AgentxError, match=r"bare/dataset.json: not JSON"):
        import_run(connect(f"sqlite:///{tmp_path / 'other.db'}"), bare)


def test_dataset_page_without_trace_stats_says_so(sweep_dir, tmp_path):
    """A dataset whose runs wrote no dataset.json: the explorer draws its stored conversations and
    its title says the trace stats are missing; with one, the table of figures is there."""
    from fastapi.testclient import TestClient

    from agentx.report.pages import add_pages
    from agentx.results.api import create_app

    engine = connect(f"sqlite:///{tmp_path / 'r.db'}")
    bare = tmp_path / "bare"
    shutil.copytree(sweep_dir / "c2", bare)
    (bare / "dataset.json").unlink()
    import_run(engine, bare)
    app = create_app(engine, writable=False)
    add_pages(app, engine)
    client = TestClient(app)
    page = client.get("/datasets/1").text
    assert "no trace stats stored" in page and 'id="stats"' not in page and 'id="fig-turns"' in page
    import_run(engine, sweep_dir / "c6")
    page = client.get("/datasets/1").text
    assert "no trace stats stored" not in page and 'id="stats"' in page and 'id="fig-gaps"' in page
