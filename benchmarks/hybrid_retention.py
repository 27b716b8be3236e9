"""Hybrid attention at 1M tokens: the prefix-hit collapse without window retention and its
recovery with sparse checkpoints, in virtual time (issue #30; SPEC §6 "Hybrid attention").

The case: 14 lanes of 1M-token agent sessions. `agentx trace synth --sessions 60 --seed 1` (the
AgentX-shaped synthetic corpus; 70 % of its sessions run on a 1M-context model and compact at
940k tokens) holds exactly 14 sessions whose context passes 900k tokens (901,725 to 939,697,
164 to 628 requests each, no subagents); the script writes that corpus to a temporary folder,
keeps those 14 and replays them at concurrency 14 (a lane per session) with `agentx sim bench`.
The model is gpt-oss-120b's layer layout (18 full-attention and 18 sliding-window layers of 128
tokens, from its config.json) in MXFP4, with `--max-model-len 1048576`: beyond gpt-oss's own
131,072-token context, as the article's 1M-context hybrid model (whose config is not public)
runs. Each row is

    agentx sim bench --traces LONG14/ --concurrency 14 --hardware H200 --gpus G --model gpt-oss-120b \\
        --precision mxfp4 --max-model-len 1048576 --window-retention R [--checkpoint-blocks K] --duration D

    python benchmarks/hybrid_retention.py [--gpus 4 2] [--duration 1800] [--markdown]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agentx.engine.config import Deployment, EngineConfig  # noqa: E402
from agentx.engine.core import EngineCore  # noqa: E402
from agentx.replay.corpus import Corpus  # noqa: E402
from agentx.replay.settings import BenchSettings  # noqa: E402
from agentx.traces.load import load_sessions  # noqa: E402
from agentx.traces.synth import write_corpus  # noqa: E402
from agentx.virtual.runner import sim_bench  # noqa: E402
from mdtable import markdown  # noqa: E402

LONG = 900_000  # a session is a 1M-token one when its context passes this
POINTS = (("off", 64), ("none", 64), ("sparse", 16), ("sparse", 64), ("sparse", 256))


def long_sessions(tmp: Path) -> Path:
    """The synthetic corpus's sessions whose context passes LONG tokens, in a folder of their own."""
    everything, long = tmp / "synth60", tmp / "long14"
    write_corpus(everything, 60, 1)
    long.mkdir()
    for path in sorted(everything.glob("*.json")):
        (session,) = load_sessions([path])
        if max(r.isl for s in session.streams for r in s.requests) > LONG:
            shutil.copy(path, long / path.name)
    return long


def point(corpus: Corpus, gpus: int, retention: str, every: int, args, out: Path) -> dict:
    settings = BenchSettings.build(out=str(out), url="virtual", concurrency=14, duration=args.duration,
                                   **corpus.labels)
    engine = EngineConfig(hardware="H200", gpus=gpus, model="gpt-oss-120b", precision="mxfp4",
                          max_model_len=1_048_576, window_retention=retention, checkpoint_blocks=every)
    sim_bench(settings, corpus.sessions(14), Deployment(engine))
    metrics = json.loads((out / "result.json").read_text())["request_metrics"]
    core = EngineCore(engine)
    return {"hit": metrics["cache"]["measured_hit_rate"], "theory": metrics["cache"]["theoretical_hit_rate"],
            "ttft_p50": metrics["ttft_s"]["p50"], "ttft_p90": metrics["ttft_s"]["p90"],
            "tok_gpu": metrics["throughput"]["total_tok_s_per_gpu"],
            "ok": json.loads((out / "result.json").read_text())["requests"]["succeeded"],
            "kv_tokens": core.kv.num_blocks * engine.block_size,
            "checkpoints": core.hybrid.capacity if core.hybrid else 0}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, nargs="+", default=[4, 2])
    parser.add_argument("--duration", type=float, default=1800.0)
    parser.add_argument("--markdown", action="store_true", help="A Markdown table (the docs').")
    args = parser.parse_args()
    caption = (f"14 lanes of the 14 synthetic sessions past {LONG:,} tokens; gpt-oss-120b MXFP4 on H200, "
               f"max model length 1,048,576; {args.duration:g} s profiling (virtual time)")
    heads = ["GPUs", "retention", "K", "full KV tokens", "checkpoints", "hit", "theory", "TTFT p50 s", "TTFT p90 s",
             "tok/s per GPU", "requests"]
    if not args.markdown:
        print(caption)
        print(f"{'GPUs':>4}  {'retention':<10}{'K':>4}{'full KV tokens':>16}{'checkpoints':>12}{'hit':>8}{'theory':>8}"
              f"{'TTFT p50':>10}{'TTFT p90':>10}{'tok/s/GPU':>11}{'requests':>9}")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        corpus = Corpus((str(long_sessions(Path(tmp))),))
        for gpus in args.gpus:
            for retention, every in POINTS:
                r = point(corpus, gpus, retention, every, args, Path(tmp) / f"{gpus}-{retention}-{every}")
                k = str(every) if retention == "sparse" else "-"
                rows.append([str(gpus), retention, k, f"{r['kv_tokens']:,}", f"{r['checkpoints']:,}", f"{r['hit']:.1%}",
                             f"{r['theory']:.1%}", f"{r['ttft_p50']:.2f}", f"{r['ttft_p90']:.2f}",
                             f"{r['tok_gpu']:,.0f}", str(r["ok"])])
                if not args.markdown:
                    print(f"{gpus:>4}  {retention:<10}{k:>4}{r['kv_tokens']:>16,}{r['checkpoints']:>12,}"
                          f"{r['hit']:>8.1%}{r['theory']:>8.1%}{r['ttft_p50']:>9.2f}s{r['ttft_p90']:>9.2f}s"
                          f"{r['tok_gpu']:>11,.0f}{r['ok']:>9}", flush=True)
    if args.markdown:
        print(f"{caption}\n\n{markdown(heads, rows, left=0)}")


if __name__ == "__main__":
    main()
