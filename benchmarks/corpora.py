"""The synthetic corpus the benchmarks share: `agentx trace synth --sessions 393 --seed 1`, the
393-session agentic corpus of the issues' rack-scale and policy rows."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def synthetic_393(folder: Path) -> Path:
    """Write the corpus into folder/corpus and return that path."""
    corpus = Path(folder) / "corpus"
    subprocess.run([sys.executable, "-m", "agentx.cli", "trace", "synth", "--sessions", "393", "--seed", "1",
                    "--out", str(corpus)], check=True, stdout=subprocess.DEVNULL)
    return corpus
