"""The virtual-twin rules of SPEC section 3 (`twin_ttft`, `twin_itl`) on hand-made records and twin
figures: a run off its twin by more than 2.5 % on TTFT p50 or p90, or ITL p50, is NOT VALID with
its reason; within it, valid; a twin that could not be built is listed as not checked."""

from agentx.metrics.summary import summarize
from agentx.metrics.tables import trust_lines
from agentx.metrics.validity import TWIN_LIMIT
from tests.metrics.test_validity import rec

# 40 requests: TTFT 1.0 s each (p50 = p90 = 1.0), ITL (3.0 - 1.0) / 20 = 0.1 s
RECORDS = [rec(i) for i in range(40)]


def run_with(twin: dict | None) -> dict:
    run = {"finished": True, "settings": {}}
    if twin is not None:
        run["twin"] = twin
    return summarize(RECORDS, run, [], [])


def twin(ttft_p50=1.0, ttft_p90=1.0, itl_p50=0.1) -> dict:
    return {"checked": True, "ttft_p50_s": ttft_p50, "ttft_p90_s": ttft_p90, "itl_p50_s": itl_p50, "succeeded": 40}


def rules(result: dict) -> dict:
    return {r["rule"]: r for r in result["validity"]["rules"] if r["rule"].startswith("twin")}


def test_a_run_equal_to_its_twin_is_valid_with_both_rules_and_their_figures():
    result = run_with(twin())
    assert result["validity"]["valid"]
    got = rules(result)
    assert set(got) == {"twin_ttft", "twin_itl"}
    assert all(r["ok"] and r["figure"] == 0 and r["bound"] == TWIN_LIMIT == 0.025 for r in got.values())
    assert result["twin"]["deviation"] == {"ttft_p50_s": 0.0, "ttft_p90_s": 0.0, "itl_p50_s": 0.0}


def test_ttft_p90_off_its_twin_by_more_than_the_limit_is_not_valid():
    # the run's p90 is 1.0 s, the twin's 0.96: +4.2 %
    result = run_with(twin(ttft_p90=0.96))
    v = result["validity"]
    assert not v["valid"] and len(v["reasons"]) == 1
    assert v["reasons"][0].startswith("virtual twin: TTFT p90 1,000.0 ms is +4.2% off the same plan in virtual time "
                                      "(960.0 ms; limit 2.5%)")
    assert rules(result)["twin_ttft"]["figure"] == 1.0 / 0.96 - 1
    assert rules(result)["twin_itl"]["ok"]


def test_ttft_p50_just_inside_the_limit_passes_and_just_outside_fails():
    assert run_with(twin(ttft_p50=1.0 / 1.024))["validity"]["valid"]
    assert not run_with(twin(ttft_p50=1.0 / 1.026))["validity"]["valid"]
    assert not run_with(twin(ttft_p50=1.0 / 0.974))["validity"]["valid"]  # the run below its twin


def test_itl_off_its_twin_is_a_rule_of_its_own():
    result = run_with(twin(itl_p50=0.09))
    assert [r["rule"] for r in result["validity"]["rules"] if not r["ok"]] == ["twin_itl"]
    assert "virtual twin: ITL p50 100.0 ms is +11.1% off" in result["validity"]["reasons"][0]


def test_a_twin_that_could_not_be_built_is_listed_as_not_checked_and_does_not_fail():
    result = run_with({"checked": False, "reason": "the sim injects faults (rate 0.1)"})
    assert result["validity"]["valid"]
    got = rules(result)
    assert all(r["figure"] is None and r["ok"] and r["reason"] == "not checked: the sim injects faults (rate 0.1)"
               for r in got.values()) and set(got) == {"twin_ttft", "twin_itl"}
    assert "virtual twin: not checked (the sim injects faults (rate 0.1))" in trust_lines(result)


def test_no_twin_no_rule():
    """Not against agentx-sim (or a virtual run itself): no twin to speak of, no rule listed."""
    result = run_with(None)
    assert result["twin"] is None and not rules(result)


def test_the_summary_prints_the_twin_beside_the_run():
    lines = trust_lines(run_with(twin(ttft_p50=0.98, ttft_p90=1.01, itl_p50=0.1)))
    line = next(x for x in lines if x.startswith("virtual twin"))
    assert line == ("virtual twin (the same plan in virtual time): TTFT p50 980.0 ms (run +2.0%), p90 1,010.0 ms "
                    "(run -1.0%), ITL p50 100.0 ms (run +0.0%)")


def test_the_requests_against_their_twins_are_printed_once_in_the_twin_line():
    """The request-by-request comparison is the twin line's; the reason does not repeat it (a
    NOT VALID paragraph repeated it once per failed twin rule: issue #45)."""
    tw = {**twin(ttft_p90=0.96), "paired_ttft_s": {"n": 40, "p50": 0.0045, "p90_abs": 0.0201, "max_abs": 0.029}}
    result = run_with(tw)
    said = "request by request TTFT +4.5 ms (median), 90 % within 20.1 ms (40 pairs)"
    assert next(x for x in trust_lines(result) if x.startswith("virtual twin")).endswith("; " + said)
    assert not result["validity"]["valid"] and "request by request" not in result["validity"]["reasons"][0]
    assert sum(said in line for line in trust_lines(result)) == 1


def test_the_paired_percentiles_say_what_the_window_membership_did():
    paired = {"n": 105, "p50": 0.0045, "p90_abs": 0.0201, "max_abs": 0.029, "unpaired_run": 1, "unpaired_twin": 1,
              "ttft_p50_rel": 0.005, "ttft_p90_rel": -0.012}
    line = next(x for x in trust_lines(run_with({**twin(), "paired_ttft_s": paired})) if x.startswith("virtual twin"))
    assert line.endswith("(105 pairs; over them TTFT p50 +0.5%, p90 -1.2%; unpaired: 1 of the run, 1 of the twin)")


def paired(n=105, p50_rel=0.005, p90_rel=-0.012, itl_rel=0.004, unpaired_run=1, unpaired_twin=0) -> dict:
    return {"n": n, "p50": 0.0045, "p90_abs": 0.0175, "max_abs": 0.05, "unpaired_run": unpaired_run,
            "unpaired_twin": unpaired_twin, "ttft_p50_rel": p50_rel, "ttft_p90_rel": p90_rel, "itl_p50_rel": itl_rel}


def test_the_rules_compare_the_requests_both_windows_hold_not_the_windows_edge():
    """The quiet demo's c16 (SPEC section 10): one request at the window's edge moved the window's
    TTFT p50 +9.3 % off the twin's while the 105 requests both held agreed within 0.5 %: valid, and
    the line still shows both."""
    result = run_with({**twin(ttft_p50=1.0 / 1.093), "paired_ttft_s": paired()})
    assert result["validity"]["valid"], result["validity"]["reasons"]
    got = rules(result)
    assert set(got) == {"twin_ttft", "twin_itl", "twin_window"}
    assert got["twin_ttft"]["figure"] == 0.012 and got["twin_itl"]["figure"] == 0.004
    assert got["twin_window"]["figure"] == 1 / 106 and got["twin_window"]["bound"] == 0.05
    line = next(x for x in trust_lines(result) if x.startswith("virtual twin"))
    assert "TTFT p50 914.9 ms (run +9.3%)" in line
    assert line.endswith("over them TTFT p50 +0.5%, p90 -1.2%, ITL p50 +0.4%; unpaired: 1 of the run, 0 of the twin)")


def test_the_same_requests_off_their_twins_are_not_valid_even_when_the_windows_agree():
    result = run_with({**twin(), "paired_ttft_s": paired(p90_rel=0.031)})
    v = result["validity"]
    assert not v["valid"] and [r["rule"] for r in v["rules"] if not r["ok"]] == ["twin_ttft"]
    assert v["reasons"][0].startswith("virtual twin: TTFT p90 over the 105 requests both windows hold is +3.1% off "
                                      "the same requests in virtual time (limit 2.5%): the host moved")
    bad_itl = run_with({**twin(), "paired_ttft_s": paired(itl_rel=-0.026)})["validity"]
    assert [r["rule"] for r in bad_itl["rules"] if not r["ok"]] == ["twin_itl"]


def test_windows_that_hold_other_requests_are_not_valid():
    # 4 + 2 of 111 requests in one window only: 5.4 %, over the 5 % limit; 5 of 110: 4.5 %, within it
    v = run_with({**twin(), "paired_ttft_s": paired(unpaired_run=4, unpaired_twin=2)})["validity"]
    assert [r["rule"] for r in v["rules"] if not r["ok"]] == ["twin_window"]
    assert v["reasons"][0] == ("virtual twin: 4 of the run's and 2 of the twin's requests are in one window only "
                               "(5.4% of 111; limit 5%): the host moved which requests started inside the window")
    assert run_with({**twin(), "paired_ttft_s": paired(unpaired_run=3, unpaired_twin=2)})["validity"]["valid"]
