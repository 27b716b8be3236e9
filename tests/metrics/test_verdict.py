"""One verdict line per run (SPEC section 2, "Printed summary"; issue #45): `valid`, or the first
failed rule's reason, the names of the others and what to do; the sweep table names the failed
rules and marks a low sample apart from the verdict; the two tok/s-per-MW figures say which is
which. Results are real summaries of hand-made records (`summarize`)."""

from rich.console import Console

from agentx.metrics.summary import summarize
from agentx.metrics.tables import result_lines, sweep_table
from agentx.metrics.verdict import REMEDIES, short_verdict, verdict
from agentx.replay.speed import slower_speed
from tests.metrics.test_validity import rec

GOOD = [rec(i, modeled=(1.0, 3.0), lag=(0.0, 0.0)) for i in range(40)]


def result_of(records, twin: dict | None = None, settings: dict | None = None) -> dict:
    run = {"finished": True, "settings": settings or {}}
    if twin:
        run["twin"] = twin
    return summarize(records, run, [], [])


def host_and_twin_off() -> dict:
    """Host error 40 ms on a 1 s TTFT (4 %, limit 3 %), and TTFT p90 +4.2 % off the twin."""
    twin = {"checked": True, "ttft_p50_s": 1.0, "ttft_p90_s": 0.96, "itl_p50_s": 0.1, "succeeded": 40,
            "paired_ttft_s": {"n": 40, "p50": 0.0045, "p90_abs": 0.0201, "max_abs": 0.029}}
    return result_of([rec(i, modeled=(0.96, 3.0)) for i in range(40)], twin)


def test_a_valid_run_says_valid_in_one_word():
    result = result_of(GOOD)
    assert verdict(result) == "valid" and short_verdict(result) == "yes"
    assert result_lines(result)[-1] == "valid"


def test_a_run_failing_several_rules_gets_one_line_with_the_first_reason_and_the_others_named():
    result = host_and_twin_off()
    failed = [r["rule"] for r in result["validity"]["rules"] if not r["ok"]]
    assert failed == ["host_error_ttft", "twin_ttft"]  # the host's share is checked before what it caused
    line = verdict(result)
    assert "\n" not in line and line.count("virtual twin") == 0  # the twin's sentence is not repeated
    assert line == (f"NOT VALID: {result['validity']['reasons'][0]} (and 1 more: twin_ttft); "
                    f"{REMEDIES['host_error_ttft']}")
    assert result_lines(result)[-1] == line  # the summary ends with it, once
    assert sum(x.startswith("NOT VALID") for x in result_lines(result)) == 1
    assert short_verdict(result) == "no: host_error_ttft, twin_ttft"


def test_a_command_can_say_better_what_to_do():
    result = host_and_twin_off()
    assert verdict(result, "run it at speed 1").endswith("(and 1 more: twin_ttft); run it at speed 1")


def test_the_sweep_table_names_the_failed_rules_and_keeps_low_n_apart():
    """`no (low n)` read as if the low sample were the cause: the valid column names the rules, the
    ok column says the sample is small."""
    few_but_valid = result_of(GOOD[:4])
    invalid = host_and_twin_off()
    console = Console(width=200, record=True)
    console.print(sweep_table([(4, few_but_valid), (40, invalid)]))
    rows = {line.split()[0]: line for line in console.export_text().splitlines() if line.strip()[:2] in ("4 ", "40")}
    assert "4 (low n)" in rows["4"] and rows["4"].rstrip().endswith("yes")
    assert "low n" not in rows["40"] and rows["40"].rstrip().endswith("no: host_error_ttft, twin_ttft")


def test_the_two_per_mw_figures_are_labelled_apart():
    """The cost model's tok/s per MW (the table's all-in kW per GPU) and the measured one (the GPUs'
    own draw) differ by several times; each says which it is."""
    result = result_of(GOOD, settings={"gpus": 8, "hardware": "H200"})
    line = next(x for x in result_lines(result) if x.startswith("per GPU:"))
    assert "output tok/s per MW (cost model: 1.73 kW all-in per GPU, throughput.output_tok_s_per_mw)" in line


def test_the_speed_that_would_keep_the_host_error_under_half_its_limit():
    rules = [{"rule": "host_error_ttft", "figure": 0.051, "bound": 0.03, "ok": False},
             {"rule": "client", "figure": 31.0, "bound": 10, "ok": False}]
    # at speed 2 the host error is 170 % of its limit: 85 % per unit of speed, so 0.5 keeps it at 43 %
    assert slower_speed(rules, 2.0) == 0.5
    assert slower_speed([{**rules[0], "figure": 0.3}], 1.0) is None  # 10 x the limit at speed 1: none down to 0.25
    assert slower_speed([], 2.0) == 50.0  # nothing bounds it
