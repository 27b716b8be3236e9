"""The AgentX article's agentic anchors in virtual time (docs/anchors.md): DeepSeek V4 (the
`deepseek-v4-anchor` preset) on vLLM DEP8 with 3 TB of DRAM offload, B300 at 384 lanes and B200
at 196, on the synthetic 393-session corpus (256k variant), each row

    agentx sim bench --traces CORPUS --max-context 256k --hardware B300|B200 --gpus 8 --parallelism dep \\
        --model deepseek-v4-anchor --precision nvfp4 --engine vllm --cpu-offload-gb 3000 \\
        --max-num-seqs 1024 --concurrency 384|196 --duration 1800

and prints HBM and DRAM hits (hits of the tier over all prompt tokens looked up) beside the
article's, the theoretical hit rate, TTFT p50 and tok/s per GPU.

    python benchmarks/anchors.py [--duration 1800] --markdown
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from corpora import synthetic_393
from mdtable import markdown

ROWS = (("8 x B300 DEP8, 3 TB DRAM", "B300", 384, "91 %", "1.36 %"),
        ("8 x B200 DEP8, 3 TB DRAM", "B200", 196, "73 %", "about 20 %"))


def run(out: Path, corpus: Path, hardware: str, lanes: int, duration: float) -> dict:
    cmd = [sys.executable, "-m", "agentx.cli", "sim", "bench", "--traces", str(corpus), "--max-context", "256k",
           "--hardware", hardware, "--gpus", "8", "--parallelism", "dep", "--model", "deepseek-v4-anchor",
           "--precision", "nvfp4", "--engine", "vllm", "--cpu-offload-gb", "3000", "--max-num-seqs", "1024",
           "--concurrency", str(lanes), "--duration", str(duration), "--out", str(out)]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return json.loads((out / "result.json").read_text())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", type=float, default=1800.0)
    ap.add_argument("--markdown", action="store_true", help="A Markdown table (the only output form).")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        corpus = synthetic_393(Path(tmp))
        for name, hardware, lanes, hbm_pub, dram_pub in ROWS:
            r = run(Path(tmp) / hardware, corpus, hardware, lanes, args.duration)
            rm, tiers = r["request_metrics"], r["server_metrics"].get("hit_rate_by_tier") or {}
            rows.append([name, str(lanes), f"{tiers.get('HBM', 0):.1%} ({hbm_pub})",
                         f"{tiers.get('DRAM', 0):.1%} ({dram_pub})", f"{rm['cache']['theoretical_hit_rate']:.1%}",
                         f"{rm['ttft_s']['p50']:.1f}", f"{rm['throughput']['total_tok_s_per_gpu']:,.0f}"])
    print(markdown(["deployment", "lanes", "HBM hit (article)", "DRAM hit (article)", "theoretical hit",
                    "TTFT p50 s", "tok/s per GPU"], rows))


if __name__ == "__main__":
    main()
