"""Sending a dispatch on this process's HTTP client: the body (prepared ahead or now), the
session headers, the answer read into a `Record`. The driver's loop uses it directly with
`--workers 1`; each worker process (`workers.py`) uses it for its share of the lanes."""

from __future__ import annotations

import asyncio
from typing import Callable, Protocol

from agentx.records import Record
from agentx.replay.hints import hint_headers, hint_member
from agentx.replay.http.client import Client, Exchange
from agentx.replay.http.stream import first_token_at
from agentx.replay.plan import Dispatch
from agentx.replay.render import Renderer
from agentx.replay.session_ids import SessionIdentity, with_body_field
from agentx.replay.settings import BenchSettings


class RunPort(Protocol):
    """What the sender asks of the run it sends for: the driver's `Run`, or a worker process's
    share of it (`workers._WorkerRun`)."""

    s: BenchSettings  # the target: headers, clock scale, whether chunk times are kept
    run_id: str  # in every request's X-Correlation-ID
    render: Renderer  # the bodies, prepared ahead or now
    identity: SessionIdentity  # the session headers and body fields of a turn, and the cookies answered
    t0: float  # the origin of the run's clock on this host's perf_counter
    clock: Callable[[], float]  # the run's clock (run seconds, scaled)

    def hints_of(self, d: Dispatch, session_id: str, parent_id: str | None, shared_blocks: int,
                 osl: int) -> dict | None: ...

    def record(self, d: Dispatch, isl_planned: int, osl_planned: int, theo_cached: int, start: float, end: float,
               **answer) -> Record: ...


class HttpSender:
    """Requests sent on this process's client: the body (prepared ahead or now), the session
    headers, the answer read into a `Record`. `run` gives the renderer, the session identity, the
    settings, the clock and its origin `t0` (a worker's own, on the driver's clock)."""

    close_margin_s = 0.0

    def __init__(self, run: RunPort, client: Client):
        self.run, self.client = run, client
        self.scale = run.s.target.clock_scale
        self.keep_chunks = run.s.target.keep_chunks

    def begin(self, d: Dispatch) -> tuple[Exchange, int, int, int]:
        """Start the request of a dispatch: (exchange, ISL, OSL, theoretical cached)."""
        run = self.run
        body, isl, osl, k = run.render.prepared(d)
        theo = run.render.theoretical_cached(d, isl, k)
        turn = run.identity.turn(d.tree, d.graph, d.node)
        headers = {**dict(run.s.target.headers), **run.identity.preset.headers(turn)}  # (--api-key, --header)
        headers["X-Correlation-ID"] = f"{run.run_id}-{d.tree}-{d.node}"
        hints = run.hints_of(d, turn.session_id, turn.parent_id, k, osl)
        headers.update(hint_headers(hints))
        body = with_body_field(body, run.identity.preset.body_field(turn, hints))
        body = with_body_field(body, hint_member(hints))
        return self.client.begin(run.render.bodies.path, body, headers), isl, osl, theo

    async def answer(self, d: Dispatch, sent) -> Record:
        """The record of a begun request (or of the error `begin` raised)."""
        try:
            if isinstance(sent, Exception):
                raise sent
            return await self._record(d, *sent)
        except Exception as e:  # a bug must not stall the plan: record it and go on
            now = self.run.clock()
            return self.run.record(d, 0, 0, 0, now, now, error="client", detail=f"{type(e).__name__}: {e}"[:300])

    def ahead(self, upcoming) -> bool:
        render = self.run.render
        if render.ahead_full():
            return False
        return render.prepare_ahead(upcoming())

    def forget(self, tree) -> None:
        """A finished tree (its state here was dropped by `Run.forget_finished`)."""

    def closing(self, grace: float) -> None:
        """The loop ended: in-flight answers get `grace` seconds."""

    async def close(self) -> list:
        """After the drain: the client closed; no workers to report."""
        await self.client.__aexit__(None, None, None)
        return []

    async def _record(self, d: Dispatch, ex: Exchange, isl: int, osl: int, theo: int) -> Record:
        base, scale = self.run.t0, self.scale
        rec = self.run.record(d, isl, osl, theo, (ex.res.start - base) * scale, 0.0)
        try:
            res = await self.client.finish(ex)
        except asyncio.CancelledError:
            rec.end, rec.error = self.run.clock(), "cancelled"
            return rec
        rec.start, rec.end = (res.start - base) * scale, (res.end - base) * scale
        self.run.identity.answered(d.tree, d.graph.nodes[d.node].stream, res.set_cookie)
        first = first_token_at(res)
        rec.ttft = (first - res.start) * scale if first is not None else None
        rec.isl, rec.osl, rec.cached = res.prompt_tokens, res.completion_tokens, res.cached_tokens
        if rec.osl is None and res.error is None:
            rec.osl = res.chunks
        rec.chunks, rec.finish_reason, rec.status = res.chunks, res.finish_reason, res.status
        if res.reasoning_tokens is not None or res.reasoning_chunks:
            rec.reasoning = res.reasoning_tokens if res.reasoning_tokens is not None else res.reasoning_chunks
        rec.error, rec.detail = res.error, res.detail
        if res.modeled is not None:
            m = res.modeled
            rec.modeled_ttft, rec.modeled_e2el = m.ttft_s, m.e2el_s
            rec.sim_first_lag, rec.sim_last_lag = m.first_token_lag_s, m.last_token_lag_s
        if res.error is None and first is None:
            rec.error = "empty"  # a 200 with no token at all
        if self.keep_chunks:
            rec.chunk_times = [(t - res.start) * scale for t in res.chunk_times]
        return rec
