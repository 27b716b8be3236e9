"""The telemetry parsers on pinned real outputs (tests/power/samples/README.md names each
source), and what they refuse."""

from pathlib import Path

import pytest

from agentx.power.readings import (GpuReading, TelemetryError, parse_amd_smi, parse_dcgm, parse_nvidia_smi,
                                   parse_rocm_smi)

SAMPLES = Path(__file__).parent / "samples"


def sample(name: str) -> str:
    return (SAMPLES / name).read_text()


def test_dcgm_exporter_a100_whole_gpu_only():
    # the MIG instance's series (GPU_I_ID="13") carry no power: only the whole GPU's reading
    assert parse_dcgm(sample("dcgm_a100_mig.txt")) == [GpuReading("0", 409.692, 319159.391)]


def test_dcgm_per_gpu_label_and_missing_gpu():
    text = sample("dcgm_a100_mig.txt")
    second = "\n".join(line.replace('gpu="0"', 'gpu="1"').replace("409.692000", "120.5")
                       for line in text.splitlines() if line.startswith("DCGM_FI_DEV_POWER_USAGE"))
    readings = parse_dcgm(text + "\n" + second + "\n")
    assert readings == [GpuReading("0", 409.692, 319159.391), GpuReading("1", 120.5, None)]  # GPU 1: no counter


def test_dcgm_refuses_what_is_not_telemetry():
    with pytest.raises(TelemetryError, match="no DCGM_FI_DEV_POWER_USAGE"):
        parse_dcgm("vllm:num_requests_running 3\n")
    with pytest.raises(TelemetryError, match="without a gpu label"):
        parse_dcgm("DCGM_FI_DEV_POWER_USAGE 300\n")
    with pytest.raises(TelemetryError, match="GPU 0: .*power_w"):
        parse_dcgm('DCGM_FI_DEV_POWER_USAGE{gpu="0"} -4\n')
    with pytest.raises(TelemetryError, match="GPU 0: .*nan"):
        parse_dcgm('DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu="0"} NaN\n')


def test_nvidia_smi_h200_idle_and_load():
    assert parse_nvidia_smi(sample("nvidia_smi_h200_idle.csv")) == [GpuReading("0", 77.71)]
    assert parse_nvidia_smi(sample("nvidia_smi_h200_load.csv")) == [GpuReading("0", 627.40)]
    # --format=csv,nounits (what agentx asks for) prints the same without units
    nounits = sample("nvidia_smi_h200_load.csv").replace(" W", "").replace(" [W]", "")
    assert parse_nvidia_smi(nounits) == [GpuReading("0", 627.40)]


def test_nvidia_smi_not_available_and_refusals():
    text = sample("nvidia_smi_h200_idle.csv").replace("77.71 W", "[N/A]")
    assert parse_nvidia_smi(text) == [GpuReading("0", None)]
    with pytest.raises(TelemetryError, match="no GPU rows"):
        parse_nvidia_smi(sample("nvidia_smi_h200_idle.csv").splitlines()[0] + "\n")
    with pytest.raises(TelemetryError, match="no index and power.draw"):
        parse_nvidia_smi("No devices were found\n")
    with pytest.raises(TelemetryError, match="GPU 0: power.draw: cannot read"):
        parse_nvidia_smi(sample("nvidia_smi_h200_idle.csv").replace("77.71 W", "[GPU requires reset]"))
    with pytest.raises(TelemetryError, match="GPU 0: .*<= 20000"):
        parse_nvidia_smi(sample("nvidia_smi_h200_idle.csv").replace("77.71 W", "77710 W"))


def test_amd_smi_power_and_energy():
    assert parse_amd_smi(sample("amd_smi_metric_power.json")) == [GpuReading("0", 10.0)]
    assert parse_amd_smi(sample("amd_smi_metric_energy_shape.json")) == [
        GpuReading("0", 745.0, 1234567.891), GpuReading("1", 138.0, None)]
    with pytest.raises(TelemetryError, match="not JSON"):
        parse_amd_smi("amd-smi: AMDSMI_STATUS_NOT_INIT")
    with pytest.raises(TelemetryError, match="unknown unit"):
        parse_amd_smi(sample("amd_smi_metric_power.json").replace('"unit": "W"', '"unit": "hp"'))


def test_rocm_smi_cards():
    assert parse_rocm_smi(sample("rocm_smi_shape.json")) == [
        GpuReading("0", 612.0, 1233046.3500936), GpuReading("1", None, None)]
    with pytest.raises(TelemetryError, match="no cardN"):
        parse_rocm_smi('{"system": {}}')
