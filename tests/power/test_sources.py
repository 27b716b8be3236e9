"""Reading the tools: a stand-in `nvidia-smi` on PATH (no GPU here) replays the pinned H200
output, then exits as nvidia-smi does when the driver loses its GPUs; the sampler records
every read, failed ones included, and `power.jsonl` reads back typed."""

import asyncio
import sys
import textwrap

import pytest

from agentx.errors import AgentxError
from agentx.power.readings import GpuReading
from agentx.power.sampler import PowerSampler, read_power
from agentx.power.sources import ToolSource, check_spec, find_source
from tests.power.test_parsers import SAMPLES

FAKE = """\
#!{python}
import sys
from pathlib import Path
count = Path({state!r})
n = int(count.read_text()) if count.exists() else 0
count.write_text(str(n + 1))
assert sys.argv[1:] == ["--query-gpu=index,uuid,name,power.draw", "--format=csv,nounits"], sys.argv
if n >= 3:
    print("No devices were found")
    sys.exit(6)
print(Path({idle!r} if n == 0 else {load!r}).read_text(), end="")
"""


@pytest.fixture
def fake_nvidia_smi(tmp_path, monkeypatch):
    tool = tmp_path / "bin" / "nvidia-smi"
    tool.parent.mkdir()
    tool.write_text(FAKE.format(python=sys.executable, state=str(tmp_path / "calls"),
                                idle=str(SAMPLES / "nvidia_smi_h200_idle.csv"),
                                load=str(SAMPLES / "nvidia_smi_h200_load.csv")))
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tool.parent}")
    return tool


def test_sampler_records_reads_and_the_tool_exiting(fake_nvidia_smi, tmp_path):
    path = tmp_path / "power.jsonl"
    t = iter(range(100))

    async def go():
        with PowerSampler(ToolSource("nvidia-smi"), path, lambda: float(next(t)), lambda: "profile") as sampler:
            results = [await sampler.sample_once("open" if i == 0 else None) for i in range(5)]
        return results, sampler

    results, sampler = asyncio.run(go())
    assert results == [True, True, True, False, False] and sampler.errors == 2
    rows = read_power(path)
    assert [r.phase for r in rows] == ["open"] + ["profile"] * 4
    assert rows[0].gpus == [GpuReading("0", 77.71)] and rows[1].gpus == [GpuReading("0", 627.40)]
    assert rows[3].error == "nvidia-smi: exited with status 6: No devices were found" and rows[3].gpus == []


def test_a_missing_tool_is_a_failed_read(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    path = tmp_path / "power.jsonl"

    async def go():
        with PowerSampler(ToolSource("amd-smi"), path, lambda: 0.0, lambda: "profile") as sampler:
            return await sampler.sample_once()

    assert asyncio.run(go()) is False
    assert read_power(path)[0].error.startswith("amd-smi: cannot run")


def test_auto_finds_the_tool_on_path(fake_nvidia_smi):
    source, tried = asyncio.run(find_source(None))
    assert source.name == "nvidia-smi" and any("9400" in t for t in tried)  # no DCGM exporter here


def test_power_setting_is_checked():
    assert check_spec("dcgm:http://127.0.0.1:9400/metrics") == "dcgm:http://127.0.0.1:9400/metrics"
    assert check_spec("nvidia-smi") == "nvidia-smi" and check_spec("none") == "none"
    for bad in ("dcgm:", "dcgm:127.0.0.1:9400", "nvml", ""):
        with pytest.raises(AgentxError, match="power: want dcgm:URL"):
            check_spec(bad)


def test_power_jsonl_bad_line_names_file_and_line(tmp_path):
    path = tmp_path / "power.jsonl"
    path.write_text(textwrap.dedent("""\
        {"t": 0.0, "phase": "open", "gpus": [{"gpu": "0", "power_w": -1.0}]}
        {"t": 1.0, "phase": "close", "gpus": []}
        """))
    with pytest.raises(AgentxError, match=r"power.jsonl: line 1: Expected `float` >= 0.0 - at `\$.gpus\[0\].power_w`"):
        read_power(path)
