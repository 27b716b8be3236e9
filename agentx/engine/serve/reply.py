"""Writing an answer as the engine delivers its tokens: an SSE stream (a write per wake-up) or
one body at the end, each with the request's modeled timings, and the lag of every write."""

from __future__ import annotations

import asyncio
import json
import time

from aiohttp import web

from agentx.engine import api
from agentx.engine.config import ServeConfig
from agentx.engine.core import Sequence
from agentx.engine.disagg import answer_len
from agentx.engine.serve.loop import EngineLoop
from agentx.engine.tokenizer import Tokenizer

JSON = "application/json"
SSE_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}


class Replies:
    """The answers of one server. `timing` is a request's record of its writes: the wall time of
    the first token, tokens written, their lags (first, last, max) and the modeled timings."""

    def __init__(self, cfg: ServeConfig, engine: EngineLoop, tokenizer: Tokenizer):
        self.cfg, self.engine, self.tokenizer = cfg, engine, tokenizer

    async def stream(self, request, seq: Sequence, shape, include_usage: bool, fault, timing: dict):
        resp = web.StreamResponse(headers=SSE_HEADERS)
        await resp.prepare(request)
        head, sent = None, 0
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
            frames = [head] + self._frames(shape, seq, sent, new)
            head = b""
            if fault == "malformed" and sent == 0:
                frames.insert(2, b'data: {"id": "' + shape.rid.encode() + b'", "choices": [{"text\n\n')
            self.written(seq, sent, sent + len(new), timing)
            sent += len(new)
            done = seq.finish_reason is not None and upto == len(seq.output) and not cut
            if done:
                u = shape.usage(len(seq.prompt), len(seq.output), seq.cached_tokens)
                frames.append(shape.close(seq.finish_reason, u, include_usage, self.modeled(seq, timing)))
            await resp.write(b"".join(frames))
            if done:
                return resp
            if cut:
                self.engine.core.abort(seq)
                request.transport.close()
                return resp
            if fault == "stall" and sent == len(new):  # right after the first token(s)
                await asyncio.sleep(self.cfg.faults.stall_s)

    def _frames(self, shape, seq: Sequence, sent: int, new: list[int]) -> list[bytes]:
        """The SSE events of tokens sent..sent+len(new): reasoning up to `seq.reasoning`, then text
        (an eval answer's pieces first, `--answers eval`)."""
        json_word = self.tokenizer.json_word
        if seq.answer is not None:
            pieces = seq.answer.pieces(seq.digest)
            return [shape.token_frame(json.dumps(pieces[sent + i]).encode() if sent + i < len(pieces) else
                                      json_word(t)) for i, t in enumerate(new)]
        if sent + len(new) <= seq.reasoning:
            return [shape.reasoning_frame(json_word(t)) for t in new]
        if sent < seq.reasoning:
            return [(shape.reasoning_frame if sent + i < seq.reasoning else shape.token_frame)(json_word(t))
                    for i, t in enumerate(new)]
        return [shape.token_frame(json_word(t)) for t in new]

    async def complete(self, request, seq: Sequence, shape, fault, timing: dict):
        while not (seq.finish_reason and seq.delivered == len(seq.output)):
            await seq.waiter.wait()
            seq.waiter.clear()
            if timing["first"] is None and seq.delivered:
                timing["first"] = time.time()
            if seq.delivered > timing["written"]:
                self.written(seq, timing["written"], seq.delivered, timing)
        if fault == "stall":
            await asyncio.sleep(self.cfg.faults.stall_s)
        if fault == "disconnect":
            request.transport.close()
            return web.Response(status=499)
        u = shape.usage(len(seq.prompt), len(seq.output), seq.cached_tokens)
        if seq.answer is not None:
            pieces = seq.answer.pieces(seq.digest)
            body = shape.full_body("".join(pieces) + self.tokenizer.decode(seq.output[len(pieces):]),
                                   seq.finish_reason, u)
        elif seq.reasoning:
            thinking, text = (self.tokenizer.decode(part) for part in (seq.output[:seq.reasoning], seq.output[seq.reasoning:]))
            body = shape.full_body(text, seq.finish_reason, u, thinking)
        else:
            body = shape.full_body(self.tokenizer.decode(seq.output), seq.finish_reason, u)
        body = api.with_extension(body, self.modeled(seq, timing))
        if fault == "malformed":
            body = body[: len(body) // 2]
        return web.Response(body=body, content_type=JSON)

    def written(self, seq: Sequence, lo: int, hi: int, timing: dict) -> None:
        """Tokens lo..hi are written now: their lag (now minus when the oldest was due, modeled
        seconds) goes to the lag histogram, once per token, and to the request's figures."""
        lag = max(0.0, self.engine.modeled_now() - seq.due[lo])
        self.engine.stats.lag.observe(lag, hi - lo)
        if lo == 0:
            timing["first_lag"] = lag
        timing["last_lag"] = max(0.0, self.engine.modeled_now() - seq.due[hi - 1])
        timing["max_lag"] = max(timing["max_lag"], lag)
        timing["written"] = hi

    def modeled(self, seq: Sequence, timing: dict) -> dict:
        """The request's modeled timings (modeled seconds): the `agentx_sim` extension object of
        the final chunk, which other clients ignore (SPEC section 6, "Exactness over HTTP")."""
        arrival = self.arrival(seq)
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

    def arrival(self, seq: Sequence) -> float:
        disagg = self.engine.disagg
        return disagg.arrival_of(seq) if disagg else seq.arrival
