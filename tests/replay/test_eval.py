"""`bench --eval NAME[:N]` (SPEC section 3, "Accuracy"; issue #43): the bundled eval against the same
endpoint after the run, stored with the point; against agentx-sim answering the bundled eval
(`--answers eval`) every answer is right and the point is valid for accuracy, and against one whose
`wrong` fault corrupts a share of answers the point is NOT VALID for accuracy."""

import json

import pytest
from fastapi.testclient import TestClient

from agentx.data.evals import correct, final_number, known_answer, parse_spec, problems, prompt
from agentx.engine.launch import sim_server
from agentx.errors import AgentxError
from agentx.metrics.tables import result_lines
from agentx.metrics.validity import ACCURACY_DROP
from agentx.replay.driver import bench
from agentx.replay.evals import wilson
from agentx.replay.settings import BenchSettings
from agentx.report.pages import add_pages
from agentx.results.api import create_app
from agentx.results.db import connect
from agentx.results.importer import import_run
from agentx.traces.load import load_sessions
from tests.conftest import WEKA

SPEED = 20


def test_the_bundled_set_and_its_scoring():
    arith = problems("arith")
    assert len(arith) == 100 and len({p.question for p in arith}) == 100
    assert parse_spec("arith") == ("arith", 100) and parse_spec("arith:40") == ("arith", 40)
    for bad in ("arith:0", "arith:101", "arith:x", "gsm8k"):
        with pytest.raises(AgentxError):
            parse_spec(bad)
    p = arith[7]
    assert known_answer(prompt(p)) == p.answer and known_answer("Question: what?\nAnswer:") is None
    assert correct(p, f"3 + 4 = 7, so ... The answer is {p.answer:,}.") and not correct(p, f"{p.answer} or 1")
    assert final_number("no digits") is None and final_number("-12.50 then 1,024.") == 1024
    lo, hi = wilson(30, 30)
    assert hi == 1.0 and 0.88 < lo < 0.89  # (the Wilson interval of 30 of 30)


def _run(tmp_path, *serve: str, reference=None):
    with sim_server("--speed", str(SPEED), "--answers", "eval", *serve) as url:
        s = BenchSettings.build(url=url, concurrency=2, duration=20, out=str(tmp_path / "run"), clock_scale=SPEED,
                                warmup_requests_per_lane=1, evals="arith:30", eval_reference=reference)
        result = bench(s, load_sessions([WEKA], None))
    rule = next(r for r in result["validity"]["rules"] if r["rule"] == "accuracy")
    return result, rule


def test_the_sim_answering_the_eval_is_valid_for_accuracy(tmp_path):
    result, rule = _run(tmp_path)
    acc = result["accuracy"]
    assert (acc["eval"], acc["n"], acc["correct"], acc["errors"]) == ("arith", 30, 30, 0)
    assert acc["reference"] == 1.0 and acc["reference_source"] == "server /version"  # the sim publishes its own
    assert rule["ok"] and rule["figure"] == 1.0 and rule["bound"] == pytest.approx(1 - ACCURACY_DROP)
    stored = json.loads((tmp_path / "run" / "result.json").read_text())
    assert stored["accuracy"] == acc and "answers=eval" in stored["identity"]["engine_settings"]
    assert "accuracy: arith 30/30 = 100.0% (95 % interval 89%-100%); reference 100% (server /version)" in \
        result_lines(result)
    # stored with the point: the results database, its API and the point's page
    db = connect(f"sqlite:///{tmp_path / 'db.sqlite'}")
    point = import_run(db, tmp_path / "run").point_id
    app = create_app(db)
    add_pages(app, db)
    client = TestClient(app)
    trust = client.get(f"/api/v1/points/{point}").json()["trust"]
    assert trust["diagnosis"]["accuracy"] == 1.0 and trust["diagnosis"]["accuracy_eval"] == "arith 30/30"
    assert any(r["rule"] == "accuracy" and r["ok"] for r in trust["validity"]["rules"])
    page = client.get(f"/points/{point}").text
    assert "accuracy eval" in page and "arith 30/30" in page


def test_a_sim_that_answers_a_share_wrong_is_not_valid_for_accuracy(tmp_path):
    result, rule = _run(tmp_path, "--fault-rate", "0.3", "--fault-kinds", "wrong")
    acc = result["accuracy"]
    assert acc["errors"] == 0 and 12 <= acc["correct"] <= 27  # ~30 % answered wrong, silently
    assert all(w["answer"].startswith(" The answer is ") and final_number(w["answer"]) != w["expected"]
               for w in acc["wrong"])
    assert not rule["ok"] and rule["figure"] == acc["interval"][1] < 0.95
    assert not result["validity"]["valid"] and any(r.startswith("accuracy arith") for r in result["validity"]["reasons"])
    # the same faults with the user's lower reference: within 5 points of it, valid for accuracy
    _, lenient = _run(tmp_path / "b", "--fault-rate", "0.3", "--fault-kinds", "wrong", reference=acc["interval"][1])
    assert lenient["ok"]
