"""Bundled data: a sample of real anonymized Claude Code sessions (WEKA format).

`weka/` holds byte-exact copies of 14 public traces from `callanjfox/kv-cache-tester`
(`traces/trace_NNNN.json`, the same files as the dataset `semianalysisai/cc-traces-weka-042026`),
Apache-2.0, license in `weka/LICENSE`.
"""

from importlib.resources import files
from pathlib import Path


def sample_traces() -> Path:
    """The folder of bundled real WEKA traces: the embedded default corpus."""
    return Path(str(files("agentx.data") / "weka"))
