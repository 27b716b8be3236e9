"""Scrape a Prometheus endpoint every second into `server_metrics.jsonl` (one line per scrape:
time, phase and every sample except histogram buckets, as {"name{labels}": value})."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import aiohttp
import msgspec
from prometheus_client.parser import text_string_to_metric_families

from agentx.records import read_jsonl


def parse_samples(text: str) -> dict[str, float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name.endswith("_bucket") or s.name.endswith("_created"):
                continue
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(s.labels.items()))
            out[f"{s.name}{{{labels}}}" if labels else s.name] = s.value
    return out


class Scraper:
    def __init__(self, url: str, path: Path, clock, phase, interval_s: float = 1.0):
        self.url, self.path, self.clock, self.phase, self.interval = url, path, clock, phase, interval_s
        self.errors = 0
        self.scrapes = 0

    async def run(self) -> None:
        timeout = aiohttp.ClientTimeout(total=max(2.0, self.interval * 2))
        with open(self.path, "ab", buffering=0) as f:
            async with aiohttp.ClientSession(timeout=timeout) as session:
                next_at = time.perf_counter()
                while True:
                    await self.scrape_once(session, f)
                    next_at += self.interval
                    await asyncio.sleep(max(0.0, next_at - time.perf_counter()))

    async def scrape_once(self, session: aiohttp.ClientSession, f) -> None:
        t, phase = self.clock(), self.phase()
        try:
            async with session.get(self.url) as r:
                text = await r.text()
            samples = parse_samples(text)
        except (aiohttp.ClientError, asyncio.TimeoutError, ValueError):
            self.errors += 1
            return
        self.scrapes += 1
        f.write(msgspec.json.encode({"t": t, "phase": phase, "samples": samples}) + b"\n")


def read_series(path: Path) -> list[dict]:
    return read_jsonl(path) if path.exists() else []
