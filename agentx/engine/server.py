"""`agentx sim serve`: the engine core behind an OpenAI-compatible HTTP server (aiohttp.web).

One asyncio task runs the engine: it forms an iteration, sleeps until the iteration's modeled
end (scaled by `speed`), then wakes the handlers of the sequences that got a token. Handlers
write every token they find as its own SSE event, in one write per wake-up, so a slow event
loop coalesces writes instead of falling behind. Arrivals during an iteration join the next
one, as in a real engine. Requests are queued in the order their heads arrived (their bodies
are read and parsed concurrently), and a loop held off the CPU catches up with its modeled
schedule instead of stretching it (SPEC section 6, "Time" and "Arrival order").
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import sys
import time
from dataclasses import fields

from aiohttp import web

from agentx import __version__
from agentx.engine import api
from agentx.engine.api import (AnthropicShape, BadRequest, ChatRequest, MessagesRequest,
                               OpenAIShape, forced_tool)
from agentx.engine.config import EngineConfig, ServeConfig, published_config
from agentx.engine.core import Sequence
from agentx.engine.metrics import ServerStats, exposition
from agentx.engine.disagg import Workers, answer_len, workers
from agentx.engine.stalls import LoopWatch
from agentx.engine.tokenizer import Tokenizer, render_chat
from agentx.errors import AgentxError
from agentx.serving import head_time, json_errors, log_line, read_body, serve_app

JSON = "application/json"
SSE_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
RESYNC_S = 1.0  # behind the modeled schedule by more than this (wall): restart it from now
SLICE_S = 0.01  # while behind, run iterations back to back for this long between deliveries
ORDER_WAIT_S = 1.0  # a request waits at most this long (wall, from its head) for those that arrived before it
# The sim's clock (wall seconds): CLOCK_MONOTONIC read when asked. Not the event loop's time(): uvloop's
# counts whole milliseconds and is read once per loop turn, so heads, due times and lags were up to a
# millisecond or more off, and a timer could wake the engine before its tokens were due (issue #24).
clock = time.perf_counter
# Timers count whole milliseconds (uvloop's fire up to ~1 ms early, asyncio's up to 1 ms late): the
# engine waits for a due time on a timer until it is this close, then sleeps the rest with the loop held.
TIMER_GRAIN_S = 0.0015
# session headers routers read (agentx's --session-headers presets): logged as sent, for checking a replay
ROUTER_SESSION_HEADERS = ("X-Dynamo-Session-ID", "X-Dynamo-Parent-Session-ID", "X-Dynamo-Session-Final",
                          "X-SMG-Routing-Key", "Cookie")
ID_PREFIX = {"completion": "cmpl", "chat": "chatcmpl", "messages": "msg"}  # response ids, as the APIs write them


def deployment_settings(cfg: ServeConfig) -> str:
    """Every setting of this sim that changes its performance or its answers, in words: the
    deployment (hardware, model, GPUs, precision), each engine setting that differs from its
    default (offload, speculative decoding, batching, ...), replicas and router, and faults.
    `/version` publishes it; bench's identity takes it as `engine_settings`, a part of the
    deployment key (SPEC section 8), so a faulty sim never shares a curve with a clean one."""
    d = cfg.deployment
    e, default = d.engine, EngineConfig()
    parts = [f"{e.hardware} x{e.gpus} {e.model} {e.precision}"]
    parts += [f"{f.name}={getattr(e, f.name)}" for f in fields(e)
              if f.name not in ("hardware", "gpus", "model", "precision") and getattr(e, f.name) != getattr(default, f.name)]
    if d.replicas > 1:
        parts.append(f"replicas={d.replicas} router={d.router}")
    if d.prefill:
        parts.append(d.disaggregation())
    f = cfg.faults
    if f.rate:
        parts.append(f"faults={'+'.join(f.kinds)}@{f.rate:g} seed={f.seed} stall={f.stall_s:g}s")
    return ", ".join(parts)


def _error_response(request: web.Request, status: int, message: str, kind: str) -> web.Response:
    """An error body in the API's shape: Anthropic's on /v1/messages, OpenAI's elsewhere."""
    if request.path.startswith("/v1/messages"):
        body = api.anthropic_error_body(message, status)
    else:
        body = api.error_body(message, kind, status)
    return web.Response(status=status, body=body, content_type=JSON)


class SimServer:
    def __init__(self, cfg: ServeConfig):
        self.cfg = cfg
        dep = cfg.deployment
        self.core = workers(dep)  # replicas behind a router, or prefill and decode workers
        self.disagg = self.core if isinstance(self.core, Workers) else None
        self.tokenizer = Tokenizer(self.core.vocab)
        self.model_name = cfg.served_model_name or self.core.roofline.model.name
        self.stats = ServerStats()
        self.accepted = 0
        self.ids = itertools.count()
        try:
            self.truth = open(cfg.truth_log, "a", buffering=1) if cfg.truth_log else None
        except OSError as e:
            raise AgentxError(f"{cfg.truth_log}: {e.strerror}", "truth_log") from None
        self._wakes: list[asyncio.Event] = []
        self._last_arrival = asyncio.Event()  # set once the latest request to arrive is queued or refused
        self._last_arrival.set()
        self._reading: dict[asyncio.Event, float] = {}  # requests whose head came and body is being read: head time
        self._queued = asyncio.Event()  # set when one of them is queued or refused
        self._t0 = 0.0
        self.settings = deployment_settings(cfg)
        # the loop's own stalls (engine/stalls.py): /metrics, and a `stall` line in the truth log
        self.watch = self.stats.stalls = LoopWatch(log=self._write_truth if self.truth else None)
        self.watch.context = self._engine_state

    # ------------------------------------------------------------------ engine

    def modeled_now(self) -> float:
        return (clock() - self._t0) * self.cfg.speed

    async def engine_loop(self, core, wake: asyncio.Event) -> None:
        """Run iterations on the modeled schedule and deliver each one's tokens at its end.

        Iteration k+1 starts when iteration k ends (modeled time), and an idle engine starts
        when its first request arrived, however late the loop gets to it: a loop held off the
        CPU for a while (a busy host) catches up, running iterations back to back for up to
        SLICE_S before their tokens are delivered together, and the modeled schedule is what it
        would have been. Only more than RESYNC_S behind (CPU-bound: it cannot catch up) does
        the schedule restart from now. A request that arrived after an iteration's modeled
        start waits for the next one (`EngineCore.step`), as it would on time.
        """
        speed, t0, watch = self.cfg.speed, self._t0, self.watch
        prev_end, emitted = clock(), {}
        while True:
            if core.idle:
                wake.clear()
                await wake.wait()
            now = slice_start = clock()
            held, mark, steps = None, watch.mark(), 0
            while not core.idle:
                if core.running:
                    start = prev_end
                    modeled = (start - t0) * speed
                else:
                    modeled = max((prev_end - t0) * speed, core.waiting[0].arrival)
                    start = t0 + modeled / speed
                if now - start > RESYNC_S:
                    start, modeled = now, self._restart(core, modeled, (now - t0) * speed)
                held = self._read_before(start, now)
                if held is not None:  # a request that arrived before this iteration starts is still being read
                    break
                core.now = modeled
                step = core.step()
                steps += 1
                if self.disagg and step.finished:
                    self._hand_off(step.finished)
                prev_end = start + step.duration / speed
                if step.decodes:
                    self.stats.itl.observe(step.duration / speed, step.decodes)
                for seq in step.emitted:  # their new tokens are due at the iteration's modeled end
                    seq.due.extend([core.now] * (len(seq.output) - len(seq.due)))
                    emitted[seq] = None
                now = clock()
                if prev_end > now or now - slice_start > SLICE_S:
                    break
            watch.end(mark, "engine", lambda: {"iterations": steps})
            delay, mark, stalls = prev_end - clock(), watch.mark(), watch.count
            await _wait_until(prev_end)
            # the core may already be computing later tokens: show only these. Each stream's write is
            # a socket send (~50-90 us on a VM), so the order matters: first tokens (TTFT), then
            # answers that end here (their successors wait for them), then the rest.
            for seq in sorted(emitted, key=_delivery_rank):
                seq.delivered = len(seq.output)
                seq.waiter.set()
            if emitted:  # a loop turn for their handlers to write them before the next iteration's CPU
                emitted.clear()
                await asyncio.sleep(0)
            if watch.count == stalls:  # late (the wake-up or the turn) with no phase of ours to explain it: host, I/O
                watch.end((mark[0] + max(delay, 0.0), *mark[1:]), "wakeup")
            if held is not None:
                mark = watch.mark()
                await self._wait_read(start)
                watch.end(mark, "held", lambda: {"head_age_s": round(clock() - held, 6)})

    async def _wait_read(self, start: float) -> None:
        """Wait while a request whose head came before `start` (wall) is still being read, each at
        most ORDER_WAIT_S from its head. The condition is checked again at every wake-up: a body
        queued while the engine was delivering, before this wait began, set `_queued` before the
        wait could see it, and waiting for the next signal held the engine until another request
        was queued or the second was up (issue #24: the 0.2-1 s stalls of the demo)."""
        while (head := self._read_before(start, clock())) is not None:
            self._queued.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(head + ORDER_WAIT_S - clock()):
                    await self._queued.wait()

    def _hand_off(self, finished: list[Sequence]) -> None:
        """Prefill stages that finished: their KV leaves for a decode worker, arriving at its
        modeled time (a timer on the modeled schedule; `Workers.prefilled`)."""
        loop = asyncio.get_running_loop()
        for seq in finished:
            if self.disagg.prefilled(seq):
                when = seq.stage.sent_at + seq.stage.transfer_s
                loop.call_later(self._t0 + when / self.cfg.speed - clock(), self._kv_arrived, when)

    def _kv_arrived(self, when: float) -> None:
        for i in self.disagg.arrive(when):
            self._wakes[i].set()

    def _restart(self, core, behind: float, modeled: float) -> float:
        """Restart the modeled schedule at `modeled` (now), `behind` being where it was: the
        skipped modeled time is no engine's, so each request in flight keeps its share
        (`jumped`) and the modeled timings it is told leave it out: a restart shows as lag."""
        self.stats.restarts += 1
        for seq in (*core.running, *core.waiting):
            share = modeled - max(behind, seq.arrival)
            if share > 0:
                seq.jumped += share
                if seq.first_token_at is None:
                    seq.jumped_first += share
        return modeled

    def _read_before(self, start: float, now: float) -> float | None:
        """The head time of the oldest request still being read whose head came before `start`
        (wall); None if none. The engine holds such an iteration until the request is queued, so
        the sim's own reading and parsing of a body is not modeled time: the request arrives
        when its head did (waiting at most ORDER_WAIT_S for a stalled body)."""
        oldest = min(self._reading.values(), default=None)
        if oldest is None or oldest > start:
            return None
        live = [h for h in self._reading.values() if now - h < ORDER_WAIT_S and h <= start]
        return min(live) if live else None

    async def _start_engine(self, app) -> None:
        self._wakes = [asyncio.Event() for _ in self.core.cores]
        self._t0 = clock()
        self.watch.start()
        app["engine"] = [asyncio.create_task(self.engine_loop(core, wake))
                         for core, wake in zip(self.core.cores, self._wakes)]

    async def _stop_engine(self, app) -> None:
        for task in app["engine"]:
            task.cancel()
        self.watch.stop()
        if self.truth:
            self.truth.close()

    def app(self) -> web.Application:
        app = web.Application(client_max_size=1 << 28, middlewares=[json_errors(_error_response)])
        app.on_startup.append(self._start_engine)
        app.on_cleanup.append(self._stop_engine)
        app.router.add_post("/v1/completions", self.completions)
        app.router.add_post("/v1/chat/completions", self.chat_completions)
        app.router.add_post("/v1/messages", self.messages)
        app.router.add_get("/v1/models", self.models)
        app.router.add_get("/health", self.health)
        app.router.add_get("/version", self.version)
        app.router.add_get("/metrics", self.metrics)
        return app

    # ---------------------------------------------------------------- handlers

    async def health(self, request):
        return web.Response()

    async def version(self, request):
        """vLLM's /version ({"version"}), plus the engine's name, settings and precision (vLLM's has none)."""
        return web.json_response({"version": __version__, "engine": "agentx-sim", "engine_settings": self.settings,
                                  "precision": self.cfg.deployment.engine.precision,
                                  "config": published_config(self.cfg)})  # what bench's twin replays on

    def energy_j(self) -> float | None:
        """Joules all the modeled GPUs have drawn until now (modeled time); None without power figures."""
        if not self.core.cores[0].power.known:
            return None
        now = self.modeled_now()
        return sum(c.cfg.gpus * c.power.energy_j(now) for c in self.core.cores)

    async def metrics(self, request):
        mark = self.watch.mark()
        body = exposition(self.core, self.stats, self.model_name, self.modeled_now())
        self.watch.end(mark, "metrics")
        return web.Response(body=body, content_type="text/plain", charset="utf-8")

    async def models(self, request):
        card = {"id": self.model_name, "object": "model", "created": int(time.time()), "owned_by": "agentx",
                "root": self.model_name, "max_model_len": self.core.max_model_len}
        return web.json_response({"object": "list", "data": [card]})

    async def completions(self, request):
        return await self._serve(request, "completion")

    async def chat_completions(self, request):
        return await self._serve(request, "chat")

    async def messages(self, request):
        return await self._serve(request, "messages")

    async def _serve(self, request: web.Request, style: str):
        """Serve one request; `style` is completion, chat (OpenAI) or messages (Anthropic)."""
        arrival, now = time.time(), clock()
        head = head_time(request) or now  # when the connection read it (aiohttp's hops to here are not the client's)
        arrival -= now - head
        anthropic = style == "messages"
        ahead, turn = self._last_arrival, asyncio.Event()
        self._last_arrival = turn
        self._reading[turn] = head
        try:  # read and parse (concurrently with other requests), then queue in the order the heads arrived
            body = await read_body(request, self.cfg.request_timeout_s)
            mark = self.watch.mark()
            try:
                req, prompt, max_tokens, tool = self._prompt(body, style)
                self.watch.end(mark, "parse", lambda: {"body_bytes": len(body), "prompt_tokens": len(prompt)})
            except BadRequest as e:
                self._count_error("bad_request")
                body = api.anthropic_error_body(str(e), e.status) if anthropic else e.body()
                return web.Response(status=e.status, body=body, content_type=JSON)
            with contextlib.suppress(TimeoutError):  # one stalled body must not hold back the rest
                async with asyncio.timeout(head + ORDER_WAIT_S - clock()):
                    await ahead.wait()
            fault = self.cfg.faults.fault_for(self.accepted)
            self.accepted += 1
            rid = f"{ID_PREFIX[style]}-{next(self.ids)}"
            if fault in ("http500", "overflow"):
                return self._fault_response(request, rid, fault, prompt, arrival, anthropic)
            mark = self.watch.mark()
            seq = self.core.new_sequence(rid, prompt, max_tokens, req.min_tokens, req.ignore_eos, fault == "corrupt")
            seq.hints = req.agentx_hints
            seq.waiter = asyncio.Event()
            self.core.add(seq, (head - self._t0) * self.cfg.speed, request.headers.get("X-Session-ID"))
            self.watch.end(mark, "queue", lambda: {"id": rid, "prompt_tokens": len(prompt)})
            energy_at_arrival = self.energy_j()
        finally:
            turn.set()
            del self._reading[turn]
            self._queued.set()
        self._wakes[seq.replica].set()
        if anthropic:
            shape = AnthropicShape(rid, self.model_name, tool)
            include_usage = True
        else:
            shape = OpenAIShape(rid, self.model_name, int(arrival), style == "chat", tool, self.cfg.reasoning_field)
            include_usage = bool(req.stream_options and req.stream_options.include_usage)
            if style == "chat" and not tool:
                seq.reasoning = round(self.cfg.reasoning_share * answer_len(seq))
        timing = {"first": None, "written": 0, "first_lag": None, "last_lag": None, "max_lag": 0.0,
                  "energy_j": energy_at_arrival}
        try:
            if req.stream:
                return await self._stream(request, seq, shape, include_usage, fault, timing)
            return await self._complete(request, seq, shape, fault, timing)
        except ConnectionError:  # the client went away: free its sequence, nobody reads the answer
            self.core.abort(seq)
            log_line(f"client went away during {request.method} {request.path} ({rid})")
            return web.Response(status=499)
        except asyncio.CancelledError:
            self.core.abort(seq)
            raise
        finally:
            mark = self.watch.mark()
            self._finish(request, seq, arrival, timing, fault)
            self.watch.end(mark, "finish", lambda: {"id": seq.id, "prompt_tokens": len(seq.prompt)})

    def _prompt(self, body: bytes, style: str):
        tool = None
        if style == "chat":
            req = api.parse(ChatRequest, body)
            messages = [{"role": m.role, "content": m.content, "tool_calls": m.tool_calls} for m in req.messages]
            prompt = self.tokenizer.encode(render_chat(messages, req.tools))
            max_tokens = req.max_completion_tokens or req.max_tokens
            tool = forced_tool(req.tools, req.tool_choice)
        elif style == "messages":
            req = api.parse(MessagesRequest, body)
            messages = [{"role": m.role, "content": m.content} for m in req.messages]
            prompt = self.tokenizer.encode(render_chat(messages, req.tools, req.system))
            max_tokens = req.max_tokens
            tool = forced_tool(req.tools, req.tool_choice)
        else:
            req = api.parse_completion(body, self.core.vocab)  # token ids checked against the vocabulary
            prompt = self.tokenizer.encode(req.prompt) if isinstance(req.prompt, str) else req.prompt
            max_tokens = req.max_tokens
        if req.model is not None and req.model != self.model_name:
            raise BadRequest(f"The model `{req.model}` does not exist.", 404, "NotFoundError", "model")
        if not prompt:
            raise BadRequest("The prompt is empty.", param="prompt")
        problem = self.core.context_error(len(prompt), max_tokens or 1)
        if problem:
            raise BadRequest(problem, param="prompt" if style == "completion" else "messages")
        return req, prompt, max_tokens, tool

    def _fault_response(self, request, rid: str, fault: str, prompt: list[int], arrival: float, anthropic: bool):
        self._count_error(fault)
        self._log(request, rid, arrival, None, len(prompt), 0, 0, fault)
        if fault == "http500":
            message, status, kind = "simulated internal server error", 500, "InternalServerError"
        else:
            message = self.core.context_error(len(prompt), self.core.max_model_len - len(prompt) + 1)
            status, kind = 400, "BadRequestError"
        body = api.anthropic_error_body(message, status) if anthropic else api.error_body(message, kind, status)
        return web.Response(status=status, body=body, content_type=JSON)

    async def _stream(self, request, seq: Sequence, shape, include_usage: bool, fault, timing):
        resp = web.StreamResponse(headers=SSE_HEADERS)
        await resp.prepare(request)
        head, sent, json_word = None, 0, self.tokenizer.json_word
        stop_len = answer_len(seq)
        disconnect_at = max(1, stop_len // 2) if stop_len > 1 else 0
        while True:
            await seq.waiter.wait()
            seq.waiter.clear()
            upto = seq.delivered
            new = seq.output[sent:upto]
            if not new:
                continue
            cut = fault == "disconnect" and sent + len(new) >= disconnect_at
            if cut:  # send half the answer, then drop the connection
                new = new[: disconnect_at - sent]
            if timing["first"] is None:
                timing["first"] = time.time()
            if head is None:
                head = shape.open(len(seq.prompt), max(seq.cached_tokens, 0))
            if sent + len(new) <= seq.reasoning:
                frames = [head] + [shape.reasoning_frame(json_word(t)) for t in new]
            elif sent < seq.reasoning:
                frames = [head] + [(shape.reasoning_frame if sent + i < seq.reasoning else shape.token_frame)(json_word(t))
                                   for i, t in enumerate(new)]
            else:
                frames = [head] + [shape.token_frame(json_word(t)) for t in new]
            head = b""
            if fault == "malformed" and sent == 0:
                frames.insert(2, b'data: {"id": "' + shape.rid.encode() + b'", "choices": [{"text\n\n')
            self._written(seq, sent, sent + len(new), timing)
            sent += len(new)
            done = seq.finish_reason is not None and upto == len(seq.output) and not cut
            if done:
                u = shape.usage(len(seq.prompt), len(seq.output), seq.cached_tokens)
                frames.append(shape.close(seq.finish_reason, u, include_usage, self._modeled(seq, timing)))
            await resp.write(b"".join(frames))
            if done:
                return resp
            if cut:
                self.core.abort(seq)
                request.transport.close()
                return resp
            if fault == "stall" and sent == len(new):  # right after the first token(s)
                await asyncio.sleep(self.cfg.faults.stall_s)

    async def _complete(self, request, seq: Sequence, shape, fault, timing):
        while not (seq.finish_reason and seq.delivered == len(seq.output)):
            await seq.waiter.wait()
            seq.waiter.clear()
            if timing["first"] is None and seq.delivered:
                timing["first"] = time.time()
            if seq.delivered > timing["written"]:
                self._written(seq, timing["written"], seq.delivered, timing)
        if fault == "stall":
            await asyncio.sleep(self.cfg.faults.stall_s)
        if fault == "disconnect":
            request.transport.close()
            return web.Response(status=499)
        u = shape.usage(len(seq.prompt), len(seq.output), seq.cached_tokens)
        if seq.reasoning:
            thinking, text = (self.tokenizer.decode(part) for part in (seq.output[:seq.reasoning], seq.output[seq.reasoning:]))
            body = shape.full_body(text, seq.finish_reason, u, thinking)
        else:
            body = shape.full_body(self.tokenizer.decode(seq.output), seq.finish_reason, u)
        body = api.with_extension(body, self._modeled(seq, timing))
        if fault == "malformed":
            body = body[: len(body) // 2]
        return web.Response(body=body, content_type=JSON)

    # -------------------------------------------------------------- accounting

    def _written(self, seq: Sequence, lo: int, hi: int, timing: dict) -> None:
        """Tokens lo..hi are written now: their lag (now minus when the oldest was due, modeled
        seconds) goes to the lag histogram, once per token, and to the request's figures."""
        lag = max(0.0, self.modeled_now() - seq.due[lo])
        self.stats.lag.observe(lag, hi - lo)
        if lo == 0:
            timing["first_lag"] = lag
        timing["last_lag"] = max(0.0, self.modeled_now() - seq.due[hi - 1])
        timing["max_lag"] = max(timing["max_lag"], lag)
        timing["written"] = hi

    def _modeled(self, seq: Sequence, timing: dict) -> dict:
        """The request's modeled timings (modeled seconds): the `agentx_sim` extension object of
        the final chunk, which other clients ignore (SPEC section 6, "Exactness over HTTP")."""
        arrival = self._arrival(seq)
        out = {"speed": self.cfg.speed, "arrival_s": arrival,
               "queue_s": None if seq.scheduled_at is None else max(0.0, seq.scheduled_at - arrival),
               "ttft_s": None if seq.first_token_at is None else seq.first_token_at - arrival - seq.jumped_first,
               "e2el_s": None if seq.finished_at is None else seq.finished_at - arrival - seq.jumped,
               "schedule_skipped_s": seq.jumped,
               # a restart's skipped time is lag too: the tokens came that much later than the model says
               "first_token_lag_s": None if timing["first_lag"] is None else timing["first_lag"] + seq.jumped_first,
               "last_token_lag_s": None if timing["last_lag"] is None else timing["last_lag"] + seq.jumped,
               "max_lag_s": timing["max_lag"] + seq.jumped, "preemptions": seq.preemptions,
               "cached_tokens": max(seq.cached_tokens, 0), "replica": seq.replica}
        if seq.stage is not None:  # disaggregated: the prefill worker, and the KV's time on the link
            out["prefill_worker"], out["kv_transfer_s"] = seq.stage.prefill, seq.stage.transfer_s
        timing["modeled"] = out
        return out

    def _arrival(self, seq: Sequence) -> float:
        return self.disagg.arrival_of(seq) if self.disagg else seq.arrival

    def _count_error(self, kind: str) -> None:
        self.stats.errors[kind] = self.stats.errors.get(kind, 0) + 1

    def _finish(self, request, seq: Sequence, arrival: float, timing: dict, fault) -> None:
        end, first, energy_at_arrival = time.time(), timing["first"], timing.get("energy_j")
        if not seq.finish_reason:  # left by an unexpected exit: free its blocks
            self.core.abort(seq)
        reason = seq.finish_reason
        self.stats.success[reason] = self.stats.success.get(reason, 0) + 1
        if first is not None:
            self.stats.ttft.observe(first - arrival)
        self.stats.e2e.observe(end - arrival)
        if seq.scheduled_at is not None:
            self.stats.queue.observe(max(0.0, seq.scheduled_at - self._arrival(seq)) / self.cfg.speed)
        if fault == "corrupt":  # silent, and only where the prompt read cached blocks
            fault = "corrupt" if seq.cached_tokens > 0 else None
        elif fault:
            self._count_error(fault)
        energy = {"arrival": energy_at_arrival, "end": self.energy_j()} if energy_at_arrival is not None else None
        self._log(request, seq.id, arrival, first, len(seq.prompt), max(seq.cached_tokens, 0), len(seq.output),
                  fault or reason, end, energy, timing.get("modeled") or self._modeled(seq, timing), seq.hints)

    def _log(self, request, rid, arrival, first, prompt_tokens, cached, completion, status, end=None,
             energy=None, modeled: dict | None = None, hints=None) -> None:
        if not self.truth:
            return
        record = {
            "id": rid, "correlation_id": request.headers.get("X-Correlation-ID"),
            "session_id": request.headers.get("X-Session-ID"),
            "parent_session_id": request.headers.get("X-Parent-Session-ID"),
            "router_session": {h: request.headers[h] for h in ROUTER_SESSION_HEADERS if h in request.headers},
            "arrival": arrival, "first_token": first,
            "last_token": end if first is not None else None, "prompt_tokens": prompt_tokens,
            "cached_tokens": cached, "completion_tokens": completion, "status": status,
            "modeled": modeled,  # the agentx_sim object: modeled timings and the sim's lag
        }
        if energy is not None:  # the modeled energy of all GPUs (J, engine/power.py) as it arrived and ended
            record["energy_j"] = energy
        if hints is not None:
            record["hints"] = hints.record()
            record["hint_headers"] = {h: v for h, v in request.headers.items() if h.lower().startswith("x-agentx-")}
        self._write_truth(record)

    def _write_truth(self, record: dict) -> None:
        self.truth.write(json.dumps(record) + "\n")

    def _engine_state(self) -> dict:
        """What the engine held when a stall was recorded: requests running and waiting, the
        longest prompt among them, and the KV index's size (runs, entries)."""
        cores = self.core.cores
        seqs = [s for c in cores for s in (*c.running, *c.waiting)]
        return {"running": sum(len(c.running) for c in cores), "waiting": sum(len(c.waiting) for c in cores),
                "longest_prompt": max((s.prompt_len for s in seqs), default=0), "reading": len(self._reading),
                "kv_runs": sum(len(c.kv.runs) for c in cores), "kv_entries": sum(c.kv.entries for c in cores)}


async def _wait_until(due: float) -> None:
    """Wait until `clock()` reaches `due`, never returning before it: on a timer while it is more
    than TIMER_GRAIN_S away, then the rest in one sleep holding the loop (at most TIMER_GRAIN_S;
    other work waits that long, but no token is written early)."""
    await asyncio.sleep(max(due - clock(), 0.0))  # (a loop turn even when due: I/O runs)
    while (left := due - clock()) > 0:
        if left > TIMER_GRAIN_S:
            await asyncio.sleep(left - TIMER_GRAIN_S / 2)
        else:
            time.sleep(left)


def _delivery_rank(seq: Sequence) -> int:
    """A delivery's place among those of one instant: 0 a first token, 1 an answer's end, 2 the rest."""
    if seq.delivered == 0:
        return 0
    return 1 if seq.finish_reason is not None else 2


def serve(cfg: ServeConfig) -> None:
    """Run the server until SIGINT or SIGTERM."""
    server = SimServer(cfg)
    roof = server.core.roofline
    print(f"agentx sim: {roof.describe()}", flush=True)
    dep = cfg.deployment
    replicas = f"{dep.replicas} replicas behind a {dep.router} router, each with " if dep.replicas > 1 else ""
    if dep.prefill:
        replicas = f"{dep.label()}, {dep.prefill_route} prompts prefilled remotely, each prefill worker with "
    print(f"agentx sim: {replicas}GPU KV cache size: {roof.kv_capacity_tokens:,} tokens "
          f"({server.core.cores[0].kv.num_blocks:,} blocks of {dep.engine.block_size}); "
          f"max model length {server.core.max_model_len:,}; speed x{cfg.speed:g}", flush=True)
    if dep.prefill:
        decode = server.core.cores[dep.prefill]
        print(f"agentx sim: each decode worker: {decode.roofline.describe()}", flush=True)
    if cfg.faults.rate:
        print(f"agentx sim: injecting faults {','.join(cfg.faults.kinds)} at rate {cfg.faults.rate:g} "
              f"(seed {cfg.faults.seed})", flush=True)
    serve_app(server.app(), cfg.host, cfg.port,
              lambda port: f"agentx sim: listening on http://{cfg.host}:{port} (model {server.model_name!r})",
              idle_timeout_s=cfg.request_timeout_s)
    sys.stdout.flush()
