"""bench's virtual twin (SPEC section 3, `twin_ttft` / `twin_itl`): after a run against
`agentx sim serve`, the same plan replayed in virtual time on the deployment the sim published.

Why: over HTTP the host's noise moves arrivals by milliseconds, and the sim models its schedule
from the arrivals it saw, so its *modeled* batching and queueing change with them (the butterfly
effect); the per-request host error cannot see that, since each request is checked against what
the sim modeled for it. The twin is deterministic and host-independent: the same settings, seed,
traces and engine configuration give the same figures on any machine, so a run within B of its
twin is within 2B of any other valid run of the same plan.

The sim's configuration comes from its `/version` (`config`, `engine/config.py:published_config`),
as bench's identity discovery read it into `run.json`'s `server_identity.sim_config`. It is user
input to this client (a server of unknown build): it is decoded into the engine's own config
dataclasses, with their types and bounds, and anything this client cannot rebuild exactly
(another layout, an unknown field, faults, rendered text, ...) makes the twin "not checked" with a
one-line reason, never a failed run. The twin's run folder is a temporary one, removed after: its
figures go to `run.json` (`twin`); `virtual.runner.sim_bench(settings, sessions, deployment,
client_delay_s=client_delay(settings))` writes the same folder for a reader who wants it request
by request.

One thing the twin adds to the plan: an HTTP client hears of a request's end, and its successor
reaches the sim, a little later than the end itself (CLIENT_REACTION_S below). The twin models
that nominal delay, the same for every run of the plan, so it stays deterministic and
host-independent, and it is the branch a quiet host's runs take."""

from __future__ import annotations

import math
import tempfile
import time
from dataclasses import fields, is_dataclass
from pathlib import Path

import msgspec
import numpy as np

from agentx.engine.config import PUBLISHED_CONFIG_VERSION, Deployment
from agentx.engine.faults import FaultConfig
from agentx.engine.routing import RouterName
from agentx.errors import AgentxError
from agentx.records import Record, read_records
from agentx.replay.settings import BenchSettings

SIM_ENGINE = "agentx-sim"  # what the simulated engine calls itself on /version
# Wall seconds from a request's modeled end at the sim to its successor's modeled arrival there (less
# the plan's delay between them) that an HTTP client cannot avoid: the sim's last write, the
# client's read and its plan, its next write, the sim's read of the head. Measured 1.85 and 1.95 ms
# at the median (p10 1.2-1.3 ms) on this project's 2-core host at load 0.5-2.0, bench at c8, speed
# 5 (`benchmarks/http_split.py`; SPEC section 10, "Host cost per request"); 2.7-7.9 ms at load 1.6-6.
# The twin's plan hears of each end this x the clock scale later (modeled seconds). Without it the
# twin sits on a branch no HTTP run can take: a follow-up sent at the very instant its predecessor
# ended joins the iteration that starts then, and any later one the next iteration (1 us moves the
# demo's c16 TTFT p90 by 10 %; `benchmarks/twin_sensitivity.py`).
CLIENT_REACTION_S = 0.0019
MAX_TEXT = 200  # longest string of a published config (preset names, router, spec decoding method)
MAX_NUMBER = 1e15  # largest magnitude of a published number
MAX_ITEMS = 16  # longest list (the fault kinds)
SECTIONS = {"deployment": Deployment, "faults": FaultConfig}  # the published config's parts, by key


class NotTwinnable(Exception):
    """Why this run has no twin: one line, stored as the rule's `not checked` reason."""


def virtual_twin(settings: BenchSettings, sessions: list, server_identity: dict,
                 run_folder: Path | None = None) -> dict | None:
    """The twin of a finished bench run: {checked: true, ttft_p50_s, ttft_p90_s, itl_p50_s, ...}
    or {checked: false, reason}; None when the target is not agentx-sim (no twin to speak of).
    With the run's folder, also its TTFT request by request against the twin's (`paired_ttft_s`)."""
    engine = _published(server_identity, "engine")
    if engine != SIM_ENGINE:
        return None
    try:
        deployment, faults = decode_config(_published(server_identity, "sim_config"))
        blocked = blocker(settings, deployment, faults)
        if blocked:
            raise NotTwinnable(blocked)
        return replay(settings, sessions, deployment, read_records(run_folder) if run_folder else None)
    except (NotTwinnable, AgentxError) as e:  # (AgentxError: the run's own records unreadable)
        return {"checked": False, "reason": str(e)}


def _published(server_identity: dict, key: str):
    """A field as `run.json` keeps it ([value, source]), or None."""
    entry = server_identity.get(key)
    return entry[0] if isinstance(entry, (list, tuple)) and entry else None


def decode_config(raw) -> tuple[Deployment, FaultConfig]:
    """The sim's published config as this client's `Deployment` and `FaultConfig`, every field
    typed and bounded (the dataclasses' own checks); NotTwinnable names the field otherwise."""
    if raw is None:
        raise NotTwinnable("the sim published no config on /version (an agentx sim older than the twin)")
    if not isinstance(raw, dict):
        raise NotTwinnable(f"the sim's published config is a {type(raw).__name__}, not an object")
    version = raw.get("version")
    if version != PUBLISHED_CONFIG_VERSION or isinstance(version, bool):
        raise NotTwinnable(f"the sim's published config has version {str(version)[:20]}; this client reads "
                           f"version {PUBLISHED_CONFIG_VERSION}")
    _check_plain(raw, "config")
    unknown = sorted(set(raw) - set(SECTIONS) - {"version"})
    if unknown:
        raise NotTwinnable(f"the sim's published config has a field this client does not know: config.{unknown[0]}")
    parts = []
    for key, cls in SECTIONS.items():
        if not isinstance(raw.get(key), dict):
            raise NotTwinnable(f"the sim's published config lacks config.{key}")
        _check_known(raw[key], cls, f"config.{key}")
        try:
            parts.append(msgspec.convert(raw[key], cls))
        except msgspec.ValidationError as e:  # its message ends with the path: `... - at `$.engine.gpus``
            raise NotTwinnable(f"the sim's published config.{key}: {e}") from None
        except AgentxError as e:  # the dataclass's bounds (`gpus: must be >= 1, got 0`)
            raise NotTwinnable(f"the sim's published config.{key}: {e}") from None
    return parts[0], parts[1]


def _check_plain(value, path: str, depth: int = 0) -> None:
    """Only what a config holds: objects a few deep, short strings and lists, finite numbers of
    bounded size (the dataclasses' bounds let NaN through a `min`)."""
    if depth > 4:
        raise NotTwinnable(f"the sim's published {path} is nested too deep")
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str) or len(k) > 64:
                raise NotTwinnable(f"the sim's published {path} has a key that is not a short string")
            _check_plain(v, f"{path}.{k}", depth + 1)
    elif isinstance(value, list):
        if len(value) > MAX_ITEMS:
            raise NotTwinnable(f"the sim's published {path} has {len(value)} items (at most {MAX_ITEMS})")
        for i, v in enumerate(value):
            _check_plain(v, f"{path}[{i}]", depth + 1)
    elif isinstance(value, str):
        if len(value) > MAX_TEXT:
            raise NotTwinnable(f"the sim's published {path} is {len(value)} characters long (at most {MAX_TEXT})")
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        if not math.isfinite(value) or abs(value) > MAX_NUMBER:
            raise NotTwinnable(f"the sim's published {path} is {value!r}: not a finite number up to {MAX_NUMBER:g}")
    elif value is not None and not isinstance(value, bool):
        raise NotTwinnable(f"the sim's published {path} is a {type(value).__name__}")


def _check_known(raw: dict, cls, path: str) -> None:
    """Every key of `raw` is a field of the dataclass `cls` (nested ones too): a setting this
    client does not know could change the modeled timing, so the twin would not be the sim's."""
    known = {f.name: f for f in fields(cls)}
    for key, value in raw.items():
        if key not in known:
            raise NotTwinnable(f"the sim's published config has a field this client does not know: {path}.{key}")
        nested = known[key].default_factory if callable(known[key].default_factory) else None
        if nested is not None and is_dataclass(nested) and isinstance(value, dict):
            _check_known(value, nested, f"{path}.{key}")


def blocker(settings: BenchSettings, deployment: Deployment, faults: FaultConfig) -> str | None:
    """Why virtual time cannot replay this run exactly, or None."""
    target = settings.target
    if faults.rate > 0:
        return (f"the sim injects faults (rate {faults.rate:g}), drawn by the order requests reach it; virtual "
                "time does not model them")
    if target.wire != "tokens":
        return (f"--wire {target.wire}: the sim tokenizes the rendered text, while the twin replays the plan's "
                "token counts")
    instances = deployment.prefill + deployment.decode if deployment.prefill else deployment.replicas
    if deployment.router == RouterName.SESSION_AFFINITY and instances > 1:
        return ("the session-affinity router places streams by a hash of the session id, which over HTTP "
                "includes bench's random run id")
    return None


def client_delay(settings: BenchSettings) -> float:
    """Modeled seconds the twin's plan hears of an end late: CLIENT_REACTION_S on the run's clock."""
    return CLIENT_REACTION_S * settings.target.clock_scale


def replay(settings: BenchSettings, sessions: list, deployment: Deployment,
           run_records: list[Record] | None = None) -> dict:
    """The run's plan in virtual time on `deployment` (a temporary run folder): its figures, and
    with `run_records` the run's TTFT request by request against the twin's."""
    from agentx.virtual.runner import sim_bench

    t0, cpu0 = time.perf_counter(), time.process_time()
    delay = client_delay(settings)
    with tempfile.TemporaryDirectory(prefix="agentx-twin-") as tmp:
        twin = settings.replace(out=str(Path(tmp) / "twin"), power="none", probe_cache=0, workers="1", ray=None)
        try:
            result = sim_bench(twin, sessions, deployment, client_delay_s=delay)
            paired = paired_ttft(run_records, read_records(Path(twin.out))) if run_records is not None else None
        except AgentxError as e:  # e.g. a preset this client does not have
            raise NotTwinnable(f"the twin could not run: {e}") from None
        except Exception as e:  # anything else: the run it checks is finished and stays summarized
            raise NotTwinnable(f"the twin could not run ({type(e).__name__}: {str(e)[:200]})") from None
    rm = result["request_metrics"]
    ttft, itl = rm.get("ttft_s") or {}, rm.get("itl_s") or {}
    norm, tp = rm.get("e2e_normalized_interactivity_tok_s") or {}, rm.get("throughput") or {}
    return {"checked": True, "ttft_p50_s": ttft.get("p50"), "ttft_p90_s": ttft.get("p90"), "itl_p50_s": itl.get("p50"),
            "e2e_norm_intvty_p90": norm.get("p90"), "tput_per_gpu": tp.get("total_tok_s_per_gpu"),
            "succeeded": result["requests"]["succeeded"], "paired_ttft_s": paired,
            "client_delay_s": delay, "deployment": deployment.label(),
            "engine_settings": result["identity"].get("engine_settings"),
            "wall_s": time.perf_counter() - t0, "cpu_s": time.process_time() - cpu0}


def paired_ttft(run: list[Record], twin: list[Record]) -> dict | None:
    """Each successful profiled request's TTFT minus its twin's (the same tree, session, stream and
    node; modeled seconds): {n, p50, p90_abs, max_abs}; the requests of either side that did not
    pair (`unpaired_run`, `unpaired_twin`: the window held another set); and TTFT p50 / p90 and
    ITL p50 over the paired requests alone, the run's against the twin's (`ttft_p50_rel`,
    `ttft_p90_rel`, `itl_p50_rel`: what the twin rules check); None when none pair. The twin
    replays the same plan, so its requests pair with the run's (a tree may start on another lane
    when the host moved the schedule, so the lane is not part of the key). Over the same requests
    the comparison is about the host alone: a window's percentile can move more than its requests
    do where requests are sparse (one request at the window's edge moved the demo's c16 TTFT p50
    9 % while the 105 paired requests agreed within 0.5 %; SPEC section 10)."""
    def done(records: list[Record]) -> dict:
        return {(r.tree, r.session, r.stream, r.node): r for r in records
                if r.phase == "profile" and r.error is None and r.ttft is not None}

    mine, theirs = done(run), done(twin)
    keys = sorted(mine.keys() & theirs.keys())
    if not keys:
        return None
    a, b = (np.array([side[k].ttft for k in keys], dtype=float) for side in (mine, theirs))
    d = a - b
    shift = {f"ttft_{q}_rel": _rel(a, b, pct) for q, pct in (("p50", 50), ("p90", 90))}
    decoding = [k for k in keys if mine[k].itl is not None and theirs[k].itl is not None]
    itl_rel = _rel(*(np.array([side[k].itl for k in decoding], dtype=float) for side in (mine, theirs)), 50) \
        if decoding else None
    return {"n": len(keys), "unpaired_run": len(mine) - len(keys), "unpaired_twin": len(theirs) - len(keys),
            "p50": float(np.median(d)), "p90_abs": float(np.percentile(np.abs(d), 90)), "max_abs": float(np.abs(d).max()),
            **shift, "itl_p50_rel": itl_rel}


def _rel(a: np.ndarray, b: np.ndarray, pct: float) -> float | None:
    """a's percentile over b's, minus 1 (None where b's is 0)."""
    base = np.percentile(b, pct)
    return float(np.percentile(a, pct) / base - 1) if base else None
