"""What sets a deployment apart (SPEC section 8, "The deployment key"): every setting that changes
what the server does, or what the simulated engine models, is in the key of a point's deployment;
a setting that is not is listed in NOT_IN_KEY with why. `tests/test_deployment_key.py` walks every
declared setting (`agentx/options.py` `declared()`) and fails on one that is in neither.

The key's labels are the identity's (model, hardware, GPUs, engine and version, precision,
parallelism, speculative decoding, KV offload, router, engine settings); the client's settings
that change what the server does (what it is sent) join `engine_settings` as `client: ...`."""

from __future__ import annotations

import hashlib

# sent to the server with every request, so they change what it does: the API and body (wire), the
# session ids a router reads (session_headers), the harness hints a KV policy reads (hints)
CLIENT_KEY = {"wire": "tokens", "session_headers": "plain", "hints": "none"}
LABEL_CHARS = 300  # engine_settings' column (SPEC section 8's import bounds)

_POINT = "the point's own coordinate, stored with it (its x: lanes or rate), not its deployment's"
_WORKLOAD = "the workload, not the deployment: stored with the point (dataset, variant, scenario)"
_WINDOW = ("how the window samples the deployment; its bias is a validity rule's (cancelled, spread, "
           "host error: SPEC 3), not another deployment")
_CLIENT = "the client's side only: the server sees the same requests"
_REPORT = "what the result reports or compares, after the run"
_PLACE = "where or how the server is reached, not what it does"
_INERT = "a name on the wire or a log: the server computes the same"

NOT_IN_KEY = {
    "TargetConfig.url": _PLACE, "TargetConfig.headers": _PLACE, "TargetConfig.request_timeout": _CLIENT,
    "TargetConfig.tokenizer": "the client's tokenizer for counting chat prompts: the server's is its own",
    "TargetConfig.keep_chunks": _CLIENT, "TargetConfig.server_metrics": _REPORT, "TargetConfig.power": _REPORT,
    "TargetConfig.workers": _CLIENT, "TargetConfig.ray": _CLIENT, "TargetConfig.grace": _WINDOW,
    "TargetConfig.probe_cache": "the cache probe runs outside the window (before and after it)",
    "TargetConfig.clock_scale": "the sim's speed: figures are modeled time; the host error it adds is the "
                                "host_error rule's (SPEC 3)",
    "TargetConfig.evals": "the accuracy eval runs outside the window (after it) and is the point's figure",
    "TargetConfig.eval_reference": _REPORT,
    "Labels.engine_block_size": "how the client counts cache hits (SPEC 4), not what the server caches",
    "Labels.dataset": _WORKLOAD, "Labels.variant": _WORKLOAD, "Labels.scenario": _WORKLOAD,
    "Labels.cost_basis": _REPORT, "Labels.slo": _REPORT, "Labels.agreement": _REPORT,
    "PlanConfig.concurrency": _POINT, "PlanConfig.request_rate": _POINT, "PlanConfig.mode": _POINT,
    "PlanConfig.arrival": _POINT, "PlanConfig.time_scale": _POINT,
    "PlanConfig.duration": _WINDOW, "PlanConfig.seed": _WINDOW, "PlanConfig.warmup": _WINDOW,
    "PlanConfig.warmup_requests_per_lane": _WINDOW, "PlanConfig.warmup_seconds": _WINDOW,
    "PlanConfig.drain": _WINDOW, "PlanConfig.lead": _WINDOW, "PlanConfig.run_id": "the run's name, set per run",
    "PlanConfig.idle_cap": _WORKLOAD + "; stored in the point's settings",
    "PlanConfig.system_idle_cap": _WORKLOAD + "; stored in the point's settings",
    "PlanConfig.reuse_sessions": _WORKLOAD + "; stored in the point's settings",
    "ContentConfig.seed": _WINDOW, "ContentConfig.token_range": _WORKLOAD + "; stored in the point's settings",
    "ContentConfig.token_scale": _WORKLOAD + " (token_scale in its identity)",
    "Corpus.format": _WORKLOAD, "Corpus.max_context": _WORKLOAD + " (its variant)",
    "Corpus.scenario": _WORKLOAD + " (its scenario)", "Corpus.range_ratio": _WORKLOAD + " (the scenario's lengths)",
    "Corpus.offline": _WORKLOAD + " (an offline scenario; its lanes are the point's x)",
    "EngineConfig.seed": "the draw (answer lengths, faults), not the deployment: other seeds are its other "
                         "samples (the spread, SPEC 3)",
    "ServeConfig.host": _PLACE, "ServeConfig.port": _PLACE, "ServeConfig.speed": "as TargetConfig.clock_scale",
    "ServeConfig.served_model_name": _INERT, "ServeConfig.truth_log": _INERT, "ServeConfig.reasoning_field": _INERT,
    "ServeConfig.request_timeout_s": "how long a client has to send a request's head and body (a refusal is "
                                     "measured as an error)",
}


def client_words(settings: dict) -> list[str]:
    """`name=value` of each CLIENT_KEY setting of run.json's `settings` that is not its default."""
    return [f"{k}={settings[k]}" for k, default in CLIENT_KEY.items()
            if settings.get(k) is not None and settings[k] != default]


def fit_label(text: str, n: int = LABEL_CHARS) -> str:
    """`text` cut to `n` characters where it is longer, ending with a digest of the whole (two
    long labels that differ past the cut stay two deployments)."""
    if len(text) <= n:
        return text
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    return f"{text[:n - len(digest) - 2]} #{digest}"
