"""`--speed auto` (agentx/replay/speed.py): the speed from a probe's validity rules, which scale
with the speed (host error, sim lag), and those that do not (the client's dispatch lateness); the
probe itself against the real sim; the demo's probe at its point, read against the point's twin."""

import subprocess
import sys

from agentx.metrics.validity import HOST_ERROR_LIMIT
from agentx.replay.speed import MARGIN, PROBED_MARGIN, SPEEDS, auto_speed, choose, serve_flags, timer_lateness

QUIET = {"p50": 0.1, "p99": 0.3, "n": 200}


def rule(name, figure, bound=HOST_ERROR_LIMIT, ok=True, reason=None):
    return {"rule": name, "figure": figure, "bound": bound, "ok": ok, "reason": reason}


def test_the_speed_keeps_the_worst_scaling_rule_under_half_its_limit():
    # at speed 1 the TTFT host error is 0.6 % of TTFT p50 (a fifth of the 3 % limit): at S it is
    # 0.6 S %, so S <= 2.5 keeps it at half the limit; the fastest listed speed under 2.5 is 2
    rules = [rule("host_error_ttft", 0.006), rule("host_error_itl", 0.002), rule("sim_lag_itl", 0.001),
             rule("succeeded", 100, 1)]
    choice = choose(rules, QUIET)
    assert choice.valid and abs(choice.ceiling - MARGIN / (0.006 / HOST_ERROR_LIMIT)) < 1e-9 and choice.speed == 2.0
    assert "host_error_ttft at speed 1 is 20.0% of its limit" in choice.line()
    fast = choose([rule("host_error_itl", 0.0001)], QUIET)  # a host that adds almost nothing
    assert fast.speed == SPEEDS[-1]


def test_at_or_below_the_probes_speed_a_pick_may_use_three_quarters_of_the_limit_above_it_half():
    def at2(share):  # the demo's probe: at speed 2, no faster than 2 asked; `share` of the limit at 2
        return choose([rule("host_error_ttft", share * HOST_ERROR_LIMIT)], QUIET, probe_speed=2.0, cap=2.0)

    assert PROBED_MARGIN == 0.75 and MARGIN == 0.5
    assert at2(0.60).speed == 2.0 and "host_error_ttft at speed 2 is 60.0% of its limit: under 75%" in at2(0.6).line()
    assert at2(0.10).speed == 2.0 and "2 is the fastest asked" in at2(0.10).line()  # 5 would hold: the cap binds
    assert at2(0.90).speed == 1.5  # 67.5 % at 1.5 (90 % at 2)
    assert at2(2.5).speed == 0.5 and at2(2.5).valid  # 62.5 % at 0.5, 125 % at 1
    assert not at2(7.0).valid  # 87.5 % even at 0.25
    up = choose([rule("host_error_ttft", 0.3 * HOST_ERROR_LIMIT)], QUIET)  # probed at 1: 60 % at 2 is over half
    assert up.speed == 1.5 and abs(up.ceiling - MARGIN / 0.3) < 1e-9


def test_no_speed_when_speed_one_already_fails_a_rule_that_does_not_scale():
    late = choose([rule("client", 25.0, 10, ok=False, reason="the client could not keep the schedule"),
                   rule("host_error_ttft", 0.001)], QUIET)
    assert not late.valid and late.speed == SPEEDS[0] and "could not keep the schedule" in late.line()
    assert late.stalled  # no speed changes it (the demo probes once more: one stall fails a short probe's p99)
    jittery = choose([rule("host_error_ttft", 0.001)], {"p50": 3.0, "p99": 40.0, "n": 200})
    assert not jittery.valid and "timer lateness p99 40.0 ms" in jittery.line()
    slower = choose([rule("host_error_ttft", 0.05, ok=False)], QUIET)  # over the limit at speed 1: 0.25 fits
    assert slower.valid and slower.speed == 0.25
    busy = choose([rule("host_error_ttft", 0.2, ok=False)], QUIET)  # 6.7 x the limit: under half of it below 0.08
    assert not busy.valid and "no speed can be valid on this host now" in busy.line() and not busy.stalled


def test_the_probe_serves_the_users_deployment_not_its_address():
    assert serve_flags(["--gpus", "4", "--speed", "auto", "--port=9000", "--hardware", "B200", "--auto-lanes", "8",
                        "--truth-log", "t.jsonl"]) == ("--gpus", "4", "--hardware", "B200")


def test_a_probe_against_the_sim_reads_its_host_error_rules():
    from tests.conftest import WEKA
    from agentx.traces.load import load_sessions

    timer = timer_lateness(n=50)
    assert 0 <= timer["p50"] <= timer["p99"]
    choice = auto_speed(load_sessions([WEKA], None), 4, ("--gpus", "8"), probe_s=8.0)
    assert set(choice.shares) >= {"host_error_ttft", "host_error_itl"} and all(v >= 0 for v in choice.shares.values())
    assert choice.speed in SPEEDS
    if choice.valid and choice.ceiling is not None:  # the pick is the fastest listed speed under the ceiling
        assert choice.speed <= max(choice.ceiling, SPEEDS[0]) and all(s > choice.ceiling for s in SPEEDS
                                                                       if s > choice.speed)


def test_the_demos_probe_runs_at_its_point_and_reads_the_host_error_against_the_points_twin():
    """`agentx demo --speed auto`: the point first (virtual time), then the probe at its lanes and the
    demo's speed, its host error as a share of the point's twin's TTFT / ITL (the figures its run is
    judged against), not of the probe's short window; the pick no faster than the demo's speed."""
    from tests.conftest import WEKA
    from agentx.cli.demo import DEMO_SPEED, pick_point, probe_speed
    from agentx.metrics.validity import host_rules
    from agentx.traces.load import load_sessions

    sessions = load_sessions([WEKA], None)
    point = pick_point(sessions, [2, 4], 30.0, DEMO_SPEED, "weka")
    assert point.lanes in (2, 4) and point.reference["ttft_s"]["p50"] > 0
    choice = probe_speed(sessions, point, "weka", probe_s=4.0)
    assert choice.lanes == point.lanes and choice.probe_speed == DEMO_SPEED and choice.speed <= DEMO_SPEED
    against_twin = {r["rule"]: r["figure"] / r["bound"] / DEMO_SPEED for r in host_rules(choice.host_error,
                                                                                             point.reference)}
    assert against_twin and against_twin == choice.shares


def test_the_demo_probes_once_more_after_a_stall_and_not_after_a_host_error(monkeypatch, capsys):
    """A stand-in for the probe (a host's stall cannot be had on cue): the demo's answer to each kind
    of refusal."""
    from agentx.cli import demo
    from agentx.replay import speed

    point = type("Point", (), {"lanes": 8, "reference": {}, "last_end_s": 158.0, "worst": 0.018})()
    stall = choose([rule("client", 290.0, 10, ok=False, reason="the client could not keep the schedule")], QUIET)
    busy = choose([rule("host_error_ttft", 0.2, ok=False)], QUIET)
    fine = choose([rule("host_error_ttft", 0.006)], QUIET, probe_speed=2.0, cap=2.0)
    for answers, probes, picked in (([stall, fine], 2, 2.0), ([stall, stall], 2, None), ([busy, fine], 1, None)):
        calls = []
        monkeypatch.setattr(speed, "auto_speed", lambda *a, **k: calls.append(k) or answers[len(calls) - 1])
        choice = demo.probe_speed([], point, "bundled")
        assert len(calls) == probes and (choice.speed if choice.valid else None) == picked
        assert all(k["speed"] == demo.DEMO_SPEED and k["cap"] == demo.DEMO_SPEED for k in calls)
    printed = capsys.readouterr().out
    assert printed.count("probing again") == 2 and "so c8 should be valid here at speed 2 (about 79 wall s" in printed
    point.worst = 0.042  # a point whose own jitter moved past the twin rules' 2.5 %: the host holding it is not enough
    monkeypatch.setattr(speed, "auto_speed", lambda *a, **k: fine)
    demo.probe_speed([], point, "bundled")
    printed = capsys.readouterr().out
    assert "should be valid" not in printed and "c8's own jitter moved past 2.5% (above): its run may come NOT VALID" in printed


def test_sim_serve_refuses_a_speed_that_is_neither_a_number_nor_auto():
    res = subprocess.run([sys.executable, "-m", "agentx.cli", "sim", "serve", "--speed", "fast", "--port", "0"],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and "want a positive number or auto" in res.stderr
