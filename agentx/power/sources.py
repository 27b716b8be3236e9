"""Where readings come from: a DCGM exporter's /metrics over HTTP, or one run of nvidia-smi,
amd-smi or rocm-smi per read. `bench --power` names one (`dcgm:URL`, `nvidia-smi`, `amd-smi`,
`rocm-smi`), `none`, or `auto`: the first that answers of the target's own /metrics (the
simulated engine publishes DCGM's names), a DCGM exporter on 127.0.0.1:9400 (its default port),
then the three tools in that order."""

from __future__ import annotations

import asyncio
import shutil

import aiohttp

from agentx.errors import AgentxError
from agentx.power.readings import (GpuReading, TelemetryError, parse_amd_smi, parse_dcgm, parse_nvidia_smi,
                                   parse_rocm_smi)

TOOLS = {
    "nvidia-smi": (("nvidia-smi", "--query-gpu=index,uuid,name,power.draw", "--format=csv,nounits"), parse_nvidia_smi),
    "amd-smi": (("amd-smi", "metric", "--power", "--energy", "--json"), parse_amd_smi),
    "rocm-smi": (("rocm-smi", "--showpower", "--showenergycounter", "--json"), parse_rocm_smi),
}
DCGM_DEFAULT_URL = "http://127.0.0.1:9400/metrics"
READ_TIMEOUT_S = 5.0
SPEC_HELP = "dcgm:URL, nvidia-smi, amd-smi, rocm-smi, auto or none"


def check_spec(spec: str) -> str:
    """The `--power` setting, checked (`none` for off)."""
    spec = spec.strip()
    if spec in ("none", "auto") or spec in TOOLS:
        return spec
    if spec.startswith("dcgm:") and spec[5:].startswith(("http://", "https://")) and len(spec) < 2000:
        return spec
    raise AgentxError(f"want {SPEC_HELP}, got {spec[:100]!r}", "power")


class DcgmSource:
    def __init__(self, url: str):
        self.name, self.url = f"dcgm:{url}", url
        self.session: aiohttp.ClientSession | None = None

    async def read(self) -> list[GpuReading]:
        if self.session is None:
            self.session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=READ_TIMEOUT_S))
        try:
            async with self.session.get(self.url) as r:
                if r.status != 200:
                    raise TelemetryError(f"dcgm: {self.url} answered HTTP {r.status}")
                body = await r.read()
        except (aiohttp.ClientError, asyncio.TimeoutError) as e:
            raise TelemetryError(f"dcgm: {self.url}: {type(e).__name__} {e}".strip()) from None
        # off the event loop: an engine's /metrics is hundreds of KB (the replay's dispatch times)
        return await asyncio.to_thread(_parse_dcgm_bytes, body)

    async def close(self) -> None:
        if self.session is not None:
            await self.session.close()


def _parse_dcgm_bytes(body: bytes) -> list[GpuReading]:
    try:
        return parse_dcgm(body.decode())
    except UnicodeDecodeError:
        raise TelemetryError("dcgm: the exposition is not UTF-8") from None


class ToolSource:
    """One run of a vendor tool per read: a tool that exits with an error, hangs or is missing
    gives a failed read, not a failed run."""

    def __init__(self, tool: str):
        self.name = tool
        self.argv, self.parse = TOOLS[tool]

    async def read(self) -> list[GpuReading]:
        try:
            proc = await asyncio.create_subprocess_exec(*self.argv, stdout=asyncio.subprocess.PIPE,
                                                        stderr=asyncio.subprocess.PIPE)
        except OSError as e:
            raise TelemetryError(f"{self.name}: cannot run ({e.strerror or e})") from None
        try:
            out, err = await asyncio.wait_for(proc.communicate(), READ_TIMEOUT_S)
        except asyncio.TimeoutError:
            proc.kill()
            await proc.wait()
            raise TelemetryError(f"{self.name}: no answer within {READ_TIMEOUT_S:g} s") from None
        if proc.returncode != 0:
            first = (err or out).decode(errors="replace").strip().splitlines()
            raise TelemetryError(f"{self.name}: exited with status {proc.returncode}"
                                 + (f": {first[0][:200]}" if first else ""))
        return self.parse(out.decode(errors="replace"))

    async def close(self) -> None:
        return None


def make_source(spec: str):
    """The source a checked `--power` setting names (not `auto` or `none`)."""
    return DcgmSource(spec[5:]) if spec.startswith("dcgm:") else ToolSource(spec)


async def find_source(target_metrics_url: str | None) -> tuple[object | None, list[str]]:
    """`auto`: the first source whose read succeeds, and what was tried."""
    candidates = ([f"dcgm:{target_metrics_url}"] if target_metrics_url else []) + [f"dcgm:{DCGM_DEFAULT_URL}"]
    candidates += [tool for tool in TOOLS if shutil.which(TOOLS[tool][0][0])]
    tried = []
    for spec in candidates:
        source = make_source(spec)
        try:
            await source.read()
            return source, tried
        except TelemetryError as e:
            tried.append(str(e))
            await source.close()
    return None, tried
