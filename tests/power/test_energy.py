"""Energy over the profiling window (agentx/power/energy.py): counter increase with resets,
integrated power, missing GPUs and failed reads."""

import pytest

from agentx.power.energy import increase, integrate, window_energy
from agentx.power.readings import GpuReading
from agentx.power.sampler import PowerSample
from tests.power.test_parsers import sample
from agentx.power.readings import parse_dcgm, parse_nvidia_smi

A100 = parse_dcgm(sample("dcgm_a100_mig.txt"))[0]  # 409.692 W, counter 319159.391 J


def reads(phases_energies, gpus=("0", "1"), power=409.692):
    """Samples one second apart; each GPU's counter the A100's plus the given offsets."""
    out = []
    for t, (phase, offsets) in enumerate(phases_energies):
        if isinstance(offsets, str):
            out.append(PowerSample(float(t), phase, error=offsets))
            continue
        out.append(PowerSample(float(t), phase, [GpuReading(g, power, A100.energy_j + off)
                                                 for g, off in zip(gpus, offsets) if off is not None]))
    return out


def test_increase_counts_a_reset_from_zero():
    assert increase([10.0, 20.0, 5.0, 9.0]) == (10.0 + 5.0 + 4.0, 1)
    assert integrate([(0.0, 100.0), (1.0, 300.0), (3.0, 300.0)]) == pytest.approx(200.0 + 600.0)


def test_counter_over_the_exact_window():
    samples = reads([("warmup", (0, 0)), ("open", (100, 50)), ("profile", (500, 450)), ("close", (900, 850)),
                     ("done", (2000, 2000))])
    p = window_energy(samples, "dcgm:http://x/metrics")
    assert p["valid"] and p["window"] == "exact" and p["method"] == "counter"
    assert p["window_s"] == 2.0 and p["energy_j"] == pytest.approx(800 + 800)
    assert p["avg_w"] == pytest.approx(800.0) and p["peak_w"] == pytest.approx(2 * 409.692)
    assert [g["energy_j"] for g in p["per_gpu"]] == pytest.approx([800, 800])


def test_counter_reset_inside_the_window():
    samples = reads([("open", (100, 100)), ("profile", (600, 600)), ("close", (None, None))])
    samples[-1] = PowerSample(2.0, "close", [GpuReading("0", 400.0, 300.0), GpuReading("1", 400.0, A100.energy_j + 1100)])
    p = window_energy(samples, "dcgm:u")
    assert p["valid"] and p["counter_resets"] == 1
    assert [g["energy_j"] for g in p["per_gpu"]] == pytest.approx([500 + 300, 1000])


def test_gpu_missing_from_a_bound_read_is_not_valid():
    samples = reads([("open", (0, 0)), ("profile", (400, 400)), ("close", (800, None))])
    p = window_energy(samples, "dcgm:u")
    assert not p["valid"] and "GPU 1 is missing from the window's last read" in p["reasons"]
    assert p["per_gpu"][1]["method"] == "integrated"  # its power over the reads it has


def test_gpu_missing_inside_the_window_integrates_across_the_gap():
    samples = reads([("open", (0, 0)), ("profile", (400, None)), ("close", (800, 800))])
    p = window_energy(samples, "dcgm:u")
    assert p["valid"] and p["per_gpu"][1]["missing_reads"] == 1 and p["per_gpu"][1]["energy_j"] == 800


def test_power_only_tool_integrates():
    idle = parse_nvidia_smi(sample("nvidia_smi_h200_idle.csv"))
    load = parse_nvidia_smi(sample("nvidia_smi_h200_load.csv"))
    samples = [PowerSample(0.0, "open", idle), PowerSample(1.0, "profile", load), PowerSample(3.0, "close", load)]
    p = window_energy(samples, "nvidia-smi")
    assert p["valid"] and p["method"] == "integrated"
    assert p["energy_j"] == pytest.approx((77.71 + 627.40) / 2 + 2 * 627.40)
    assert p["peak_w"] == pytest.approx(627.40)


def test_failed_reads_and_killed_runs():
    p = window_energy(reads([("open", "nvidia-smi: exited with status 9"), ("profile", (5, 5)), ("close", (9, 9))]),
                      "nvidia-smi")
    assert not p["valid"] and any("open read failed" in r for r in p["reasons"])
    many = reads([("open", (0, 0))] + [("profile", "dcgm: timeout")] * 3 + [("close", (9, 9))])
    assert any("3 of 5 reads in the window failed" in r for r in window_energy(many, "dcgm:u")["reasons"])
    killed = reads([("profile", (0, 0)), ("profile", (300, 300))])  # no open / close reads
    p = window_energy(killed, "dcgm:u")
    assert p["valid"] and p["window"] == "periodic" and p["energy_j"] == pytest.approx(600)
    assert window_energy([], None)["reasons"] == ["no power source (bench --power)"]
    assert not window_energy([], "dcgm:u")["valid"]


def test_a_counter_that_stands_still_is_a_stale_source():
    """dcgm-exporter collects every 30 s by default: read every second, its counter repeats."""
    steps = [0, 0, 0, 300, 300, 300, 600]
    samples = reads([("open", (steps[0], steps[0]))] + [("profile", (e, e)) for e in steps[1:-1]]
                    + [("close", (steps[-1], steps[-1]))])
    p = window_energy(samples, "dcgm:u")
    assert not p["valid"] and p["energy_j"] == pytest.approx(1200)
    assert "GPU 0's energy counter did not change between 4 of 6 reads" in p["reasons"][0]


def test_a_drained_window_peaks_over_its_drain_reads_too():
    """--drain: the window closes when the last profiled request ends, after drain reads; its
    energy covers them, so its peak does too (the average above the peak was a drained H200 run's)."""
    samples = reads([("open", (0, 0)), ("profile", (100, 100)), ("drain", (1000, 1000)), ("close", (1100, 1100))])
    samples[2] = PowerSample(2.0, "drain", [GpuReading(g, 900.0, A100.energy_j + 1000) for g in ("0", "1")])
    p = window_energy(samples, "dcgm:u")
    assert p["valid"] and p["reads"] == 4 and p["avg_w"] == pytest.approx(2 * 1100 / 3)
    assert p["peak_w"] == pytest.approx(1800.0) and p["peak_w"] >= p["avg_w"]
