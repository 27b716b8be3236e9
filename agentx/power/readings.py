"""What one telemetry read returns, decoded into typed, bounded readings per GPU.

Each tool's output is parsed into `GpuReading`s (power in W, the energy counter in J where the
tool has one), checked by msgspec against their bounds. Output that cannot be read (no GPU
line, a value out of bounds, a tool's error text) raises `TelemetryError`, one line naming the
tool, the GPU and the field; the sampler records it as a failed sample and goes on.

- DCGM exporter (Prometheus text): `DCGM_FI_DEV_POWER_USAGE` (W) and
  `DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION` (mJ since boot) per `gpu` label; MIG instance series
  (a `GPU_I_ID` label) are skipped, power is a whole-GPU figure.
- nvidia-smi `--query-gpu=index,uuid,name,power.draw --format=csv[,nounits]`: power only
  (power.draw is a 1 s average on Ampere and newer); `[N/A]` is no reading.
- amd-smi `metric --power --energy --json`: a list of {"gpu", "power": {"socket_power"},
  "energy": {"total_energy_consumption"}}, values as {"value", "unit"} (or bare numbers before
  ROCm 6.2), "N/A" where unsupported.
- rocm-smi `--showpower --showenergycounter --json`: {"cardN": {"... Graphics Package Power
  (W)": "x", "Accumulated Energy (uJ)": "y"}}.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from typing import Annotated

import msgspec

from agentx.metrics.scrape import parse_samples
from agentx.metrics.server import label_value, metric_name

MAX_W = 20_000.0  # per GPU: above any accelerator's board power (a GB200 superchip is 2.7 kW)
MAX_J = 1e16  # a counter since boot: 10 kW for 30 years is 1e13 J

Watts = Annotated[float, msgspec.Meta(ge=0, le=MAX_W)]
Joules = Annotated[float, msgspec.Meta(ge=0, le=MAX_J)]
GpuId = Annotated[str, msgspec.Meta(min_length=1, max_length=64)]


class TelemetryError(ValueError):
    """A read that gave no usable reading; the message is one line."""


class GpuReading(msgspec.Struct, frozen=True, omit_defaults=True):
    gpu: GpuId  # the tool's index (DCGM's `gpu` label, nvidia-smi's index, amd-smi's gpu, rocm-smi's card)
    power_w: Watts | None = None
    energy_j: Joules | None = None  # a counter: it only grows, unless the driver or the GPU was reset


DCGM_POWER = "DCGM_FI_DEV_POWER_USAGE"
DCGM_ENERGY = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"  # mJ


def _reading(tool: str, gpu: str, power, energy) -> GpuReading:
    try:
        return msgspec.convert({"gpu": gpu, "power_w": power, "energy_j": energy}, GpuReading)
    except msgspec.ValidationError as e:
        raise TelemetryError(f"{tool}: GPU {gpu}: {e}") from None


def _finite(tool: str, gpu: str, field: str, value: float | None) -> float | None:
    if value is not None and not math.isfinite(value):
        raise TelemetryError(f"{tool}: GPU {gpu}: {field} is {value}")
    return value


def dcgm_readings(samples: dict[str, float]) -> list[GpuReading]:
    """Readings from parsed Prometheus samples (`scrape.parse_samples`' keys)."""
    found: dict[str, dict] = {}
    for key, value in samples.items():
        name = metric_name(key)
        if name not in (DCGM_POWER, DCGM_ENERGY) or label_value(key, "GPU_I_ID") is not None:
            continue
        gpu = label_value(key, "gpu")
        if gpu is None:
            raise TelemetryError(f"dcgm: {name} without a gpu label")
        field = "power_w" if name == DCGM_POWER else "energy_j"
        found.setdefault(gpu, {})[field] = _finite("dcgm", gpu, name, value if name == DCGM_POWER else value / 1000)
    if not found:
        raise TelemetryError(f"dcgm: no {DCGM_POWER} or {DCGM_ENERGY} samples")
    return [_reading("dcgm", g, found[g].get("power_w"), found[g].get("energy_j")) for g in sorted(found, key=gpu_order)]


def parse_dcgm(text: str) -> list[GpuReading]:
    try:
        samples = parse_samples(text)
    except ValueError as e:
        raise TelemetryError(f"dcgm: {e}") from None
    return dcgm_readings(samples)


def gpu_order(gpu: str) -> tuple:
    """GPU ids by number ("2" before "10"), then any others by name."""
    return (0, int(gpu), "") if gpu.isdigit() else (1, 0, gpu)


_NA = {"", "n/a", "[n/a]", "not supported", "[not supported]"}
_NUMBER = re.compile(r"^\s*([-+0-9.eE]+)\s*([A-Za-z]*)\s*$")


def _number(tool: str, gpu: str, field: str, text: str, units: dict[str, float]) -> float | None:
    """A value as the tool prints it ("77.71 W", "77.71", "N/A"), in the unit `units` maps to 1."""
    if text.strip().lower() in _NA or text.strip().lower().startswith("n/a"):
        return None
    m = _NUMBER.match(text)
    if not m or (m.group(2) and m.group(2) not in units):
        raise TelemetryError(f"{tool}: GPU {gpu}: {field}: cannot read {text.strip()[:60]!r}")
    try:
        value = float(m.group(1)) * units.get(m.group(2), 1.0)
    except ValueError:
        raise TelemetryError(f"{tool}: GPU {gpu}: {field}: cannot read {text.strip()[:60]!r}") from None
    return _finite(tool, gpu, field, value)


WATT = {"W": 1.0, "mW": 1e-3, "uW": 1e-6, "kW": 1e3}
JOULE = {"J": 1.0, "mJ": 1e-3, "uJ": 1e-6, "kJ": 1e3}
NVIDIA_SMI_QUERY = ("index", "uuid", "name", "power.draw")


def parse_nvidia_smi(text: str) -> list[GpuReading]:
    """`nvidia-smi --query-gpu=index,...,power.draw --format=csv` (with or without units; the
    header is required: columns are found by name)."""
    rows = [r for r in csv.reader(io.StringIO(text), skipinitialspace=True) if r]
    if not rows:
        raise TelemetryError("nvidia-smi: no output")
    header = [h.split(" [", 1)[0].strip() for h in rows[0]]
    if "index" not in header or "power.draw" not in header:
        raise TelemetryError(f"nvidia-smi: no index and power.draw columns in {', '.join(header)[:120]!r}")
    i, p = header.index("index"), header.index("power.draw")
    out = []
    for row in rows[1:]:
        if len(row) != len(header):
            raise TelemetryError(f"nvidia-smi: a row of {len(row)} fields under {len(header)} columns: {row[:3]}")
        gpu = row[i].strip()
        out.append(_reading("nvidia-smi", gpu, _number("nvidia-smi", gpu, "power.draw", row[p], WATT), None))
    if not out:
        raise TelemetryError("nvidia-smi: no GPU rows")
    return out


def _json(tool: str, text: str):
    try:
        return json.loads(text)
    except ValueError as e:
        raise TelemetryError(f"{tool}: not JSON ({e})") from None


def _amd_value(gpu: str, field: str, v, units: dict[str, float]) -> float | None:
    if isinstance(v, dict):
        unit = v.get("unit", "")
        v = v.get("value")
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            if unit and unit not in units:
                raise TelemetryError(f"amd-smi: GPU {gpu}: {field}: unknown unit {unit!r}")
            return _finite("amd-smi", gpu, field, float(v) * units.get(unit, 1.0))
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return _finite("amd-smi", gpu, field, float(v))
    if isinstance(v, str):
        return _number("amd-smi", gpu, field, v, units)
    if v is None:
        return None
    raise TelemetryError(f"amd-smi: GPU {gpu}: {field}: cannot read {str(v)[:60]!r}")


def parse_amd_smi(text: str) -> list[GpuReading]:
    data = _json("amd-smi", text)
    if isinstance(data, dict) and isinstance(data.get("gpu_data"), list):
        data = data["gpu_data"]
    if not isinstance(data, list) or not data:
        raise TelemetryError("amd-smi: want a non-empty list of GPUs")
    out = []
    for entry in data:
        if not isinstance(entry, dict) or "gpu" not in entry:
            raise TelemetryError("amd-smi: a list entry without \"gpu\"")
        gpu = str(entry["gpu"])
        power, energy = entry.get("power"), entry.get("energy")
        watts = (_amd_value(gpu, "power.socket_power", power.get("socket_power"), WATT)
                 if isinstance(power, dict) else None)
        joules = (_amd_value(gpu, "energy.total_energy_consumption", energy.get("total_energy_consumption"), JOULE)
                  if isinstance(energy, dict) else None)
        out.append(_reading("amd-smi", gpu, watts, joules))
    return out


ROCM_POWER = ("Current Socket Graphics Package Power (W)", "Average Graphics Package Power (W)")
ROCM_ENERGY = "Accumulated Energy (uJ)"


def parse_rocm_smi(text: str) -> list[GpuReading]:
    data = _json("rocm-smi", text)
    if not isinstance(data, dict):
        raise TelemetryError("rocm-smi: want an object of cards")
    out = []
    for card, fields in sorted(data.items(), key=lambda kv: (len(kv[0]), kv[0])):
        if not card.startswith("card") or not isinstance(fields, dict):
            continue  # "system" and other non-card entries
        gpu = card[4:] or card
        text_w = next((fields[k] for k in ROCM_POWER if k in fields), None)
        watts = _number("rocm-smi", gpu, "power", str(text_w), WATT) if text_w is not None else None
        uj = fields.get(ROCM_ENERGY)
        joules = _number("rocm-smi", gpu, ROCM_ENERGY, str(uj), {}) if uj is not None else None
        out.append(_reading("rocm-smi", gpu, watts, joules * 1e-6 if joules is not None else None))
    if not out:
        raise TelemetryError("rocm-smi: no cardN entries")
    return out
