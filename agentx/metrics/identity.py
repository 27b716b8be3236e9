"""What the target server says about itself (SPEC §4 identity): engine, version, KV block size,
maximum model length, from the endpoints each engine publishes:

- vLLM: `/version` (`{"version"}`), `/v1/models` (`max_model_len`), `/metrics`
  (`vllm:cache_config_info{block_size=...}`); the simulated engine adds `engine` to `/version`;
- SGLang: `/get_server_info` (`version`, `page_size`, `context_length` or `max_total_num_tokens`);
- llama.cpp: `/props` (`build_info`, `default_generation_settings.n_ctx` per slot); it reuses any
  common prefix of a slot's cached tokens, so its block is one token.

Every field found is returned with the endpoint it came from; nothing found is left out. Beside
FIELDS, the simulated engine's whole configuration (`sim_config`, as published: not decoded here)
is returned for bench's virtual twin (`agentx/virtual/twin.py`).
"""

from __future__ import annotations

import asyncio

import aiohttp

from agentx.metrics.scrape import parse_samples

FIELDS = ("engine", "engine_version", "block_size", "max_model_len", "engine_settings", "precision")


async def _get(session: aiohttp.ClientSession, url: str):
    try:
        async with session.get(url) as r:
            if r.status != 200:
                return None
            if url.endswith("/metrics"):
                return await r.text()
            return await r.json(content_type=None)
    except (aiohttp.ClientError, asyncio.TimeoutError, ValueError):
        return None


def _block_size(metrics_text: str | None) -> int | None:
    if not metrics_text:
        return None
    try:
        samples = parse_samples(metrics_text)
    except ValueError:
        return None
    for key in samples:
        if key.startswith("vllm:cache_config_info{") and 'block_size="' in key:
            value = key.split('block_size="', 1)[1].split('"', 1)[0]
            return int(value) if value.isdigit() else None
    return None


async def discover(base_url: str, timeout_s: float = 10.0, headers: tuple = ()) -> dict[str, tuple[object, str]]:
    """{field: (value, source)} for the fields of FIELDS the server publishes."""
    base = base_url.rstrip("/")
    found: dict[str, tuple[object, str]] = {}

    def put(field: str, value, source: str) -> None:
        if value is not None and field not in found:
            found[field] = (value, source)

    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout_s), headers=dict(headers)) as s:
        sglang, props, version, models, metrics = await asyncio.gather(
            _get(s, base + "/get_server_info"), _get(s, base + "/props"), _get(s, base + "/version"),
            _get(s, base + "/v1/models"), _get(s, base + "/metrics"))
    if isinstance(sglang, dict) and "version" in sglang:
        put("engine", "sglang", "/get_server_info")
        put("engine_version", sglang.get("version"), "/get_server_info")
        put("block_size", sglang.get("page_size"), "/get_server_info")
        put("max_model_len", sglang.get("context_length"), "/get_server_info")
    if isinstance(props, dict) and "build_info" in props:
        put("engine", "llama.cpp", "/props")
        put("engine_version", props.get("build_info"), "/props")
        put("block_size", 1, "/props (llama.cpp reuses any common prefix)")
        put("max_model_len", (props.get("default_generation_settings") or {}).get("n_ctx"), "/props")
    if isinstance(version, dict) and "version" in version:
        put("engine", version.get("engine", "vllm"), "/version")
        put("engine_version", version.get("version"), "/version")
        put("engine_settings", version.get("engine_settings"), "/version")  # agentx-sim: its settings
        put("precision", version.get("precision"), "/version")  # agentx sim's (vLLM publishes none)
        put("sim_config", version.get("config"), "/version")  # agentx sim's full config: bench's twin (not a label)
    put("block_size", _block_size(metrics), "/metrics")
    if isinstance(models, dict) and models.get("data"):
        put("max_model_len", models["data"][0].get("max_model_len"), "/v1/models")
    return found


def merge(user: dict, server: dict[str, tuple[object, str]]) -> tuple[dict, dict]:
    """Identity fields and where each came from: what the user set wins, the server fills the rest."""
    values, sources = {}, {}
    for field in FIELDS:
        if user.get(field) is not None:
            values[field], sources[field] = user[field], "user"
        elif field in server:
            values[field], sources[field] = server[field][0], "server " + server[field][1]
    return values, sources
