"""The sim server's own endpoints: /health, /version (what bench's identity and twin read),
/metrics (Prometheus text) and /v1/models."""

from __future__ import annotations

import time
from dataclasses import fields

from aiohttp import web

from agentx import __version__
from agentx.data.evals import EVALS
from agentx.engine.config import EngineConfig, ServeConfig, published_config
from agentx.engine.metrics import exposition
from agentx.engine.serve.loop import EngineLoop


def deployment_settings(cfg: ServeConfig) -> str:
    """Every setting of this sim that changes its performance or its answers, in words: the
    deployment (hardware, model, GPUs, precision), each engine setting that differs from its
    default (offload, speculative decoding, batching, ...), replicas and router, and faults.
    `/version` publishes it; bench's identity takes it as `engine_settings`, a part of the
    deployment key (SPEC section 8), so a faulty sim never shares a curve with a clean one."""
    d = cfg.deployment
    e, default = d.engine, EngineConfig()
    parts = [f"{e.hardware} x{e.gpus} {e.model} {e.precision}"]
    parts += [f"{f.name}={getattr(e, f.name)}" for f in fields(e)  # (the seed is the draw, not the deployment)
              if f.name not in ("hardware", "gpus", "model", "precision", "seed")
              and getattr(e, f.name) != getattr(default, f.name)]
    if d.replicas > 1:
        parts.append(f"replicas={d.replicas} router={d.router}")
    if d.prefill:
        parts.append(d.disaggregation())
    if cfg.answers != "tokens":
        parts.append(f"answers={cfg.answers}")
    if cfg.reasoning_share:
        parts.append(f"reasoning_share={cfg.reasoning_share:g}")
    f = cfg.faults
    if f.rate:
        parts.append(f"faults={'+'.join(f.kinds)}@{f.rate:g} seed={f.seed} stall={f.stall_s:g}s")
    return ", ".join(parts)


class Admin:
    def __init__(self, cfg: ServeConfig, engine: EngineLoop, model_name: str):
        self.cfg, self.engine, self.model_name = cfg, engine, model_name
        self.settings = deployment_settings(cfg)

    def add_routes(self, router: web.UrlDispatcher) -> None:
        router.add_get("/v1/models", self.models)
        router.add_get("/health", self.health)
        router.add_get("/version", self.version)
        router.add_get("/metrics", self.metrics)

    async def health(self, request):
        return web.Response()

    async def version(self, request):
        """vLLM's /version ({"version"}), plus the engine's name, settings and precision (vLLM's has none);
        with `--answers eval`, the clean model's accuracy on each bundled eval (every answer known: 1)."""
        body = {"version": __version__, "engine": "agentx-sim", "engine_settings": self.settings,
                "precision": self.cfg.deployment.engine.precision,
                "config": published_config(self.cfg)}  # what bench's twin replays on
        if self.cfg.answers == "eval":
            body["eval_reference"] = {name: 1.0 for name in EVALS}
        return web.json_response(body)

    async def metrics(self, request):
        engine = self.engine
        mark = engine.watch.mark()
        body = exposition(engine.core, engine.stats, self.model_name, engine.modeled_now())
        engine.watch.end(mark, "metrics")
        return web.Response(body=body, content_type="text/plain", charset="utf-8")

    async def models(self, request):
        card = {"id": self.model_name, "object": "model", "created": int(time.time()), "owned_by": "agentx",
                "root": self.model_name, "max_model_len": self.engine.core.max_model_len}
        return web.json_response({"object": "list", "data": [card]})
