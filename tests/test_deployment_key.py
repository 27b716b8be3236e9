"""Every declared setting is in the deployment key or in NOT_IN_KEY with why (SPEC section 8, "The
deployment key"; issue #43). The walk: each config class that declares settings (`option(...)`,
found in the source), each of its declared fields (`agentx/options.py` `declared()`) set to another
valid value, and the key that a point made with it gets, through the code that makes it:

- `sim bench` / `sim plan` (virtual time): the run's identity labels (`simulated_labels`) and
  bench's settings, summarized as a run folder's identity is;
- `bench` against `sim serve`: what the server publishes on /version (`deployment_settings`) as
  the identity's engine settings;
- `bench` against any server: bench's own settings.

A setting whose change leaves the key as it was must be in NOT_IN_KEY, and one in NOT_IN_KEY must
leave it as it was (the list stays true)."""

from __future__ import annotations

import ast
from dataclasses import MISSING, replace

import pytest

from agentx.content.tokens import ContentConfig
from agentx.engine.config import Deployment, EngineConfig, ServeConfig
from agentx.engine.faults import FaultConfig
from agentx.engine.serve.admin import deployment_settings
from agentx.metrics.deployment_key import NOT_IN_KEY
from agentx.metrics.summary import identity
from agentx.options import declared
from agentx.replay.corpus import Corpus
from agentx.replay.plan import PlanConfig
from agentx.replay.settings import BenchSettings, Labels, TargetConfig
from agentx.results.points import deployment_key, deployment_labels
from agentx.virtual.runner import simulated_labels
from tests.test_layering import MODULES

# config classes that declare settings but make no point, with why (none today: a new one is
# walked or listed here)
NOT_A_POINT: dict[str, str] = {}
# config classes whose settings choose the workload (which requests are replayed): they reach a
# point only as its workload labels (dataset, variant, scenario: Labels, walked below), never its
# deployment's; each of their settings is in NOT_IN_KEY
WORKLOAD = {"Corpus": Corpus}
WALKED = {c.__name__: c for c in (EngineConfig, Deployment, FaultConfig, ServeConfig, TargetConfig, PlanConfig,
                                  ContentConfig, Labels)}

# another valid value where the default's type does not give one, and the base a setting is active
# on (a router needs replicas, a decode setting a disaggregated deployment, ...)
OTHER = {"hardware": "B200", "model": "llama-3.1-70b", "ssd_drive": "kioxia-cm7-r", "spec_decode": "mtp",
         "decode_parallelism": "dep", "router": "least-loaded", "kinds": ("http500",), "url": "http://10.0.0.1:9",
         "token_range": (500, 9000), "power": "nvidia-smi", "workers": "2", "ray": "auto", "mode": "schedule",
         "tokenizer": "tok.json", "evals": "arith:10", "headers": (("X-A", "b"),), "request_rate": 2.0,
         "server_metrics": "none", "slo": (("p90_ttft_s", 1.0),), "arrival": "constant", "reasoning_field": "reasoning", "draft_tokens": 2, "run_id": "other",
         "engine_version": "0.10"}  # (a release the default engine, vLLM, has fitted apart)
BASE = {  # (prefill and decode go together: each is changed with the other)
    "EngineConfig": {"ssd_drive": dict(cpu_offload_gb=100, ssd_drives=2), "ssd_drives": dict(cpu_offload_gb=100),
                     "spec_decode": dict(draft_tokens=1, acceptance_length=1.5),
                     "draft_tokens": dict(spec_decode="mtp", draft_tokens=1, acceptance_length=1.5),
                     "acceptance_length": dict(spec_decode="mtp", draft_tokens=2, acceptance_length=1.5)},
    "Deployment": {"router": dict(replicas=2), "decode_gpus": dict(prefill=1, decode=1),
                   "decode_parallelism": dict(prefill=1, decode=1), "prefill_route": dict(prefill=1, decode=1)},
    "FaultConfig": {k: dict(rate=0.1) for k in ("kinds", "stall_s", "seed")},
}


def config_classes() -> set[str]:
    """Every class in agentx/ whose body declares a setting with `option(...)`."""
    found = set()
    for path in MODULES.values():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and any(
                    isinstance(s, ast.AnnAssign) and isinstance(s.value, ast.Call)
                    and getattr(s.value.func, "id", None) == "option" for s in node.body):
                found.add(node.name)
    return found


def other_value(f, default):
    if f.name in OTHER:
        return OTHER[f.name]
    meta = f.metadata["option"]
    if meta["choices"] is not None:
        return next(str(c.value if hasattr(c, "value") else c) for c in meta["choices"]
                    if str(c.value if hasattr(c, "value") else c) != str(default))
    if isinstance(default, bool):
        return not default
    if default is None:
        return 0.5 if meta["max"] == 1 else 3
    if isinstance(default, (int, float)):
        bound = meta["max"]
        value = default + 1 if bound is None or default + 1 <= bound else default / 2
        return type(default)(value) if isinstance(default, int) else value if value != default else default / 2
    return "x" if default == "" else default + "-other"


def key_of(settings: dict, run: dict | None = None) -> str:
    return deployment_key(deployment_labels(identity(settings, run or {})))


def bench_settings(**changes) -> dict:
    return BenchSettings.build(**{"url": "http://127.0.0.1:8000", "model": "m", **changes}).flat()


def sim_keys(sim: Deployment, serve: ServeConfig) -> tuple[str, str]:
    """(sim bench's key, bench-against-sim-serve's key) of one simulated deployment."""
    virtual = key_of({**bench_settings(), **simulated_labels(sim), "model": sim.engine.model})
    published = deployment_settings(replace(serve, deployment=sim))
    http = key_of(bench_settings(), {"server_identity": {"engine_settings": [published, "/version"]}})
    return virtual, http


def keys_with(cls: str, name: str, value) -> tuple:
    """The keys of the default point with one setting of `cls` (on its base) set to `value`."""
    base = BASE.get(cls, {}).get(name, {})
    if cls in ("EngineConfig", "Deployment", "FaultConfig", "ServeConfig"):
        e_kw = {**(base if cls == "EngineConfig" else {}), **({name: value} if cls == "EngineConfig" else {})}
        d_kw = {**(base if cls == "Deployment" else {}), **({name: value} if cls == "Deployment" else {})}
        if name in ("prefill", "decode"):
            d_kw = {"prefill": value, "decode": value}
        f_kw = {**(base if cls == "FaultConfig" else {}), **({name: value} if cls == "FaultConfig" else {})}
        s_kw = {name: value} if cls == "ServeConfig" else {}
        sim = Deployment(EngineConfig(**e_kw), **d_kw)
        virtual, http = sim_keys(sim, ServeConfig(faults=FaultConfig(**f_kw), **s_kw))
        return (http,) if cls in ("FaultConfig", "ServeConfig") else (virtual, http)  # (sim bench: no faults)
    return (key_of(bench_settings(**{name: value})),)


def base_keys(cls: str, f) -> tuple:
    """The keys of the default point (on the setting's base, where it has one)."""
    if f.default is MISSING:
        return keys_with(cls, "", None) if cls not in WALKED else (key_of(bench_settings()),)
    return keys_with(cls, f.name, BASE.get(cls, {}).get(f.name, {}).get(f.name, f.default))


def test_every_class_that_declares_settings_is_walked_or_makes_no_point():
    assert config_classes() == set(WALKED) | set(NOT_A_POINT) | set(WORKLOAD)


def test_the_workloads_settings_are_listed_as_the_workload():
    for name, cls in WORKLOAD.items():
        assert all(f"{name}.{f.name}" in NOT_IN_KEY for f in declared(cls))


def test_the_justified_list_names_declared_settings_with_a_reason():
    names = {f"{c}.{f.name}" for c, cls in {**WALKED, **WORKLOAD}.items() for f in declared(cls)}
    assert set(NOT_IN_KEY) <= names, set(NOT_IN_KEY) - names
    assert all(len(why) > 10 for why in NOT_IN_KEY.values())


@pytest.mark.parametrize("cls,name", [(c, f.name) for c, cls in WALKED.items() for f in declared(cls)])
def test_every_setting_is_in_the_key_or_justified(cls, name):
    f = next(f for f in declared(WALKED[cls]) if f.name == name)
    default = None if f.default is MISSING else f.default
    before = base_keys(cls, f)
    after = keys_with(cls, name, other_value(f, default))
    if f"{cls}.{name}" in NOT_IN_KEY:
        assert after == before, f"{cls}.{name} is listed as not in the key, but it changes it"
    else:
        changed = [a != b for a, b in zip(after, before)]
        assert all(changed), (f"{cls}.{name} changes behaviour but not the deployment key on every path "
                              f"(sim bench, bench against sim serve): {changed}; add it to the key or to "
                              f"NOT_IN_KEY with why")
