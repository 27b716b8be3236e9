"""Scrape a Prometheus endpoint every second into `server_metrics.jsonl` (one line per scrape:
time, phase and every sample except histogram buckets, as {"name{labels}": value})."""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path

import aiohttp
import msgspec

from agentx.records import Head, iter_jsonl, read_jsonl, read_line

_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_samples(text: str) -> dict[str, float]:
    """Every sample of a Prometheus text exposition but histogram buckets and `_created`
    timestamps, as {"name{k="v",...}": value} with labels sorted. A plain line scan: the
    exposition of an engine with many histograms is tens to hundreds of KB every second, and
    prometheus_client's parser takes ~0.6 ms per KB of it."""
    out = {}
    for line in text.splitlines():
        if not line or line[0] == "#":
            continue
        brace = line.find("{")
        if brace >= 0:
            close = line.rfind("}")
            name, rest = line[:brace], line[close + 1:]
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(_LABEL.findall(line[brace + 1: close])))
            key = f"{name}{{{labels}}}" if labels else name
        else:
            name, _, rest = line.partition(" ")
            key = name
        if name.endswith("_bucket") or name.endswith("_created"):
            continue
        fields = rest.split()
        if not fields:
            raise ValueError(f"no value in {line[:120]!r}")
        out[key] = float(fields[0])  # (an optional timestamp may follow)
    return out


class Scraper:
    """Periodic scrapes (`run()`), plus the two that bound the profiling window (`scrape_once`
    with phase "open" when the warmup has drained, "close" when the last profiled request has
    ended): server counters over the window are their difference."""

    def __init__(self, url: str, path: Path, clock, phase, interval_s: float = 1.0, headers: tuple = ()):
        self.headers = dict(headers)  # the target's credentials (--api-key, --header)
        self.url, self.path, self.clock, self.phase, self.interval = url, path, clock, phase, interval_s
        self.errors = 0
        self.scrapes = 0
        self.session: aiohttp.ClientSession | None = None
        self.file = None

    async def __aenter__(self):
        self.file = open(self.path, "ab", buffering=0)
        self.session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=max(2.0, self.interval * 2)),
                                             headers=self.headers)
        return self

    async def __aexit__(self, *exc):
        await self.session.close()
        self.file.close()

    async def run(self) -> None:
        next_at = time.perf_counter()
        while True:
            await self.scrape_once()
            next_at += self.interval
            await asyncio.sleep(max(0.0, next_at - time.perf_counter()))

    async def scrape_once(self, phase: str | None = None) -> bool:
        """One scrape, labelled with the run's phase (or `phase`); False when it failed."""
        t, phase = self.clock(), phase or self.phase()
        try:
            async with self.session.get(self.url) as r:
                body = await r.read()
            # off the event loop, whose turns are the replay's dispatch times (hundreds of KB from
            # an engine with many histograms; the thread yields the GIL every few ms)
            line = await asyncio.to_thread(_line, t, phase, body)
        except (aiohttp.ClientError, asyncio.TimeoutError, ValueError, UnicodeDecodeError):
            self.errors += 1
            return False
        self.scrapes += 1
        self.file.write(line)
        return True


def _line(t: float, phase: str, body: bytes) -> bytes:
    samples = parse_samples(body.decode())
    return msgspec.json.encode({"t": t, "phase": phase, "samples": samples}) + b"\n"


def read_series(path: Path) -> list[dict]:
    return read_jsonl(path) if path.exists() else []


def summary_series(path: Path) -> list[dict]:
    """The rows of a series that its summary reads (`server.summarize_server` gives the same
    answer for them as for the whole series), read a line at a time: the profile, open and close
    scrapes, the last scrape before the window, and the last three (the engine's names). An
    hour's series of a 72-GPU sim is ~400 MB of JSON: its warmup rows are never kept."""
    if not path.exists():
        return []
    kept: dict[int, dict] = {}  # offset -> row
    last: list[int] = []  # the offsets of the last three rows
    before: list[tuple[float, int]] = []  # candidates for "the last row before the window": (t, offset)
    names: dict[str, str] = {}  # one string per sample name, not one per row
    start = None  # the first profile scrape's time
    for at, head in iter_jsonl(path, Head):  # (each row's time and phase; a kept row is read whole)
        last, phase, t = [*last[-2:], at], head.phase, head.t
        if phase in ("profile", "open", "close"):
            row = read_line(path, at)
            row["samples"] = {names.setdefault(k, k): v for k, v in row["samples"].items()}
            kept[at] = row
        if phase == "profile" and start is None:
            start = t
            before = [b for b in before if b[0] <= start][-1:]
        elif phase not in ("profile", "close") and start is None:
            while before and before[-1][0] >= t:
                before.pop()  # a later row at an earlier time wins wherever the window starts
            before.append((t, at))
        elif phase not in ("profile", "close") and t <= start:
            before = [(t, at)]
    picks = ([at for _, at in before[-1:]] if start is not None else []) + last
    for at in picks:
        if at not in kept:
            kept[at] = read_line(path, at)
    return [kept[at] for at in sorted(kept)]
