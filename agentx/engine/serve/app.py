"""The sim server's HTTP routes and its life: a request is read and parsed concurrently with
others, queued on the engine in the order the heads arrived, answered as its tokens are
delivered, and accounted for (the server's figures and the truth log)."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import sys
import time

from aiohttp import web

from agentx.data.evals import known_answer
from agentx.engine import api
from agentx.engine.api import AnthropicShape, BadRequest, OpenAIShape
from agentx.engine.config import ServeConfig
from agentx.engine.core import Sequence
from agentx.engine.disagg import answer_len, workers
from agentx.engine.metrics import ServerStats
from agentx.engine.output import CORRUPTION, EvalAnswer
from agentx.engine.serve.admin import Admin
from agentx.engine.serve.loop import ORDER_WAIT_S, EngineLoop, clock
from agentx.engine.serve.prompt import parse_prompt
from agentx.engine.serve.reply import JSON, Replies
from agentx.engine.serve.truth import TruthLog
from agentx.engine.stalls import LoopWatch
from agentx.engine.tokenizer import Tokenizer
from agentx.serving import head_time, json_errors, log_line, read_body, serve_app

ID_PREFIX = {"completion": "cmpl", "chat": "chatcmpl", "messages": "msg"}  # response ids, as the APIs write them


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
        self.core = workers(cfg.deployment)  # replicas behind a router, or prefill and decode workers
        self.tokenizer = Tokenizer(self.core.vocab)
        self.model_name = cfg.served_model_name or self.core.roofline.model.name
        self.stats = ServerStats()
        self.accepted = 0
        self.ids = itertools.count()
        self.truth = TruthLog(cfg.truth_log) if cfg.truth_log else None
        self._last_arrival = asyncio.Event()  # set once the latest request to arrive is queued or refused
        self._last_arrival.set()
        # the loop's own stalls (engine/stalls.py): /metrics, and a `stall` line in the truth log
        self.watch = self.stats.stalls = LoopWatch(log=self.truth.write if self.truth else None)
        self.engine = EngineLoop(self.core, cfg.speed, self.stats, self.watch)
        self.watch.context = self.engine.state
        self.admin = Admin(cfg, self.engine, self.model_name)
        self.replies = Replies(cfg, self.engine, self.tokenizer)

    async def _start_engine(self, app) -> None:
        app["engine"] = self.engine.start()

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
        self.admin.add_routes(app.router)
        return app

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
        queued = await self._queue(request, style, head, arrival)
        if isinstance(queued, web.Response):
            return queued
        seq, req, tool, fault, energy_at_arrival = queued
        self.engine.wakes[seq.replica].set()
        shape, include_usage = self._shape(style, seq, req, tool, arrival)
        timing = {"first": None, "written": 0, "first_lag": None, "last_lag": None, "max_lag": 0.0,
                  "energy_j": energy_at_arrival}
        try:
            if req.stream:
                return await self.replies.stream(request, seq, shape, include_usage, fault, timing)
            return await self.replies.complete(request, seq, shape, fault, timing)
        except ConnectionError:  # the client went away: free its sequence, nobody reads the answer
            self.core.abort(seq)
            log_line(f"client went away during {request.method} {request.path} ({seq.id})")
            return web.Response(status=499)
        except asyncio.CancelledError:
            self.core.abort(seq)
            raise
        finally:
            mark = self.watch.mark()
            self._finish(request, seq, arrival, timing, fault)
            self.watch.end(mark, "finish", lambda: {"id": seq.id, "prompt_tokens": len(seq.prompt)})

    async def _queue(self, request: web.Request, style: str, head: float, arrival: float):
        """Read and parse the request (concurrently with other requests), then queue it on the
        engine in the order the heads arrived: (its sequence, the request, the tool it forces,
        its fault, the energy drawn until it arrived), or the response refusing it."""
        anthropic = style == "messages"
        engine, ahead, turn = self.engine, self._last_arrival, asyncio.Event()
        self._last_arrival = turn
        engine.reading[turn] = head
        try:
            body = await read_body(request, self.cfg.request_timeout_s)
            mark = self.watch.mark()
            try:
                req, prompt, max_tokens, tool, text = parse_prompt(body, style, self.tokenizer, self.core, self.model_name)
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
            self._answer(seq, text, req.ignore_eos, fault)
            seq.hints = req.agentx_hints
            seq.waiter = asyncio.Event()
            self.core.add(seq, engine.modeled_at(head), request.headers.get("X-Session-ID"))
            self.watch.end(mark, "queue", lambda: {"id": rid, "prompt_tokens": len(prompt)})
            return seq, req, tool, fault, engine.energy_j()
        finally:
            turn.set()
            del engine.reading[turn]
            engine.queued.set()

    def _answer(self, seq: Sequence, text: str | None, ignore_eos: bool, fault) -> None:
        """`--answers eval`: a bundled eval problem is answered (`The answer is N.`, its length);
        a `wrong` fault changes what the model computes from the prompt (the digest), so its
        answer (an eval's final number too) is not the clean model's."""
        value = known_answer(text) if self.cfg.answers == "eval" and text else None
        if value is not None:
            seq.answer = EvalAnswer(value, seq.digest)
            if not ignore_eos:
                seq.stop_len = min(seq.max_tokens, len(seq.answer.pieces(seq.digest)))
        if fault == "wrong":
            seq.digest ^= CORRUPTION

    def _shape(self, style: str, seq: Sequence, req, tool, arrival: float):
        """The answer's shape in the request's API, and whether its stream ends with the usage."""
        if style == "messages":
            return AnthropicShape(seq.id, self.model_name, tool), True
        shape = OpenAIShape(seq.id, self.model_name, int(arrival), style == "chat", tool, self.cfg.reasoning_field)
        if style == "chat" and not tool:
            seq.reasoning = round(self.cfg.reasoning_share * answer_len(seq))
        return shape, bool(req.stream_options and req.stream_options.include_usage)

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
            self.stats.queue.observe(max(0.0, seq.scheduled_at - self.replies.arrival(seq)) / self.cfg.speed)
        if fault == "corrupt":  # silent, and only where the prompt read cached blocks
            fault = "corrupt" if seq.cached_tokens > 0 else None
        elif fault and fault != "wrong":  # (wrong: silent, a complete answer, not the clean model's)
            self._count_error(fault)
        energy = {"arrival": energy_at_arrival, "end": self.engine.energy_j()} if energy_at_arrival is not None else None
        self._log(request, seq.id, arrival, first, len(seq.prompt), max(seq.cached_tokens, 0), len(seq.output),
                  fault or reason, end, energy, timing.get("modeled") or self.replies.modeled(seq, timing), seq.hints)

    def _log(self, request, *record, **fields) -> None:
        if self.truth:
            self.truth.request(request, *record, **fields)


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
