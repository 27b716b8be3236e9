"""`virtual/jitter.py` (SPEC section 10, "The demo"): a plan replayed against its twin with a
host's jitter, in virtual time, on the bundled traces; what `agentx demo` picks its point over HTTP
with."""

import math

from agentx.data import sample_traces
from agentx.records import Record
from agentx.replay.settings import BenchSettings
from agentx.traces.load import load_sessions
from agentx.virtual.jitter import jitter, measured

SESSIONS = load_sessions([sample_traces()])


def settings(n: int, duration: float = 30.0) -> BenchSettings:
    return BenchSettings.build(url="virtual", concurrency=n, duration=duration, gpus=8, hardware="H200", grace=30.0)


def test_the_host_error_a_client_measures_shows_in_the_deviation():
    """The same draws (seeded) without and with a host error of 200 ms on each TTFT (a second of
    TTFT p50 at most here): only the second moves the paired TTFT percentiles by over 10 %."""
    quiet = jitter(settings(4), SESSIONS, speed=1.0, draws=2, host_error_s=0.0)
    loud = jitter(settings(4), SESSIONS, speed=1.0, draws=2, host_error_s=0.2)
    assert quiet.lanes == 4 and quiet.requests > 0 and quiet.last_end_s > 30
    assert len(loud.deviations) == 2 and all(math.isfinite(d) and d >= 0 for d in quiet.deviations)
    assert loud.worst > 0.1 and loud.deviations[0] > quiet.worst


def test_draws_are_seeded_and_sorted():
    a = jitter(settings(4), SESSIONS, speed=2.0, draws=3)
    b = jitter(settings(4), SESSIONS, speed=2.0, draws=3)
    assert a == b and list(a.deviations) == sorted(a.deviations) and a.worst == a.deviations[-1]


def test_measured_ttfts_are_later_by_the_host_error_and_nothing_else():
    rec = Record(run="r", lane=0, tree=0, replay=0, session="s", stream=0, stream_kind="main", node=0, phase="profile",
                 planned=0.0, start=0.0, end=3.0, isl_planned=100, osl_planned=21, theo_cached=0, ttft=1.0, isl=100,
                 osl=21, chunks=21)
    assert measured([rec], 0.0, 0) == [rec]
    late = measured([rec] * 50, 0.002, 7)
    assert all(r.ttft > 1.0 and r.end == 3.0 for r in late)
    assert 0.001 < sum(r.ttft - 1.0 for r in late) / 50 < 0.004  # exponential, mean 2 ms


def test_the_demo_picks_the_candidate_its_host_jitter_moves_least(monkeypatch, capsys):
    from agentx.cli import demo

    monkeypatch.setattr(demo, "DEMO_DRAWS", 2)
    found = {n: jitter(settings(n), SESSIONS, speed=2.0, draws=2) for n in (2, 4)}
    picked = demo.pick_point(SESSIONS, [2, 4], 30.0, 2.0, "bundled").lanes
    assert picked == min(found, key=lambda n: (found[n].worst, found[n].last_end_s))
    printed = " ".join(capsys.readouterr().out.split())
    assert f"c2 {found[2].worst:.1%}, c4 {found[4].worst:.1%} -> c{picked}" in printed
    one = demo.pick_point(SESSIONS, [4], 30.0, 2.0, "bundled")  # one candidate: its twin alone, no draws
    assert one.lanes == 4 and one.deviations == () and one.reference == found[4].reference
