"""AIPerf replaying the requests an `agentx bench` run sent, for `client_ceiling.py` section 3.

AIPerf is never a dependency of agentx: it runs from its own executable (`--aiperf PATH`, else
`aiperf` on PATH; e.g. `python -m venv /tmp/aiperf-venv && /tmp/aiperf-venv/bin/pip install
aiperf==0.13.0`). The same request set: the agentx run's records (every request it sent, in the
order it sent them: input length as planned, output length as planned; at most `--aiperf-rows`,
evenly spaced in that order, since AIPerf renders every prompt before it starts) become one
Mooncake row each, with the `hash_ids` of that request in `agentx trace convert --to mooncake`
(512-token blocks), so AIPerf synthesizes one block of text per hash id and every request of a
session shares its prefix blocks as in the trace. Rows carry no `session_id`: AIPerf would
otherwise accumulate a session's turns into each prompt, while each row's `input_length` is
already the whole prompt. AIPerf sends them back to back at the same concurrency
(`--concurrency`, no timestamps) for the same window, drawn in a seeded shuffle
(`--dataset-sampling-strategy shuffle`: a window too short for every row still sends the set's
shape, not its first turns only).

AIPerf's Mooncake prompts are text made with a Hugging Face tokenizer: one is trained here with
`tokenizers` (byte-level BPE over a generated vocabulary, nothing downloaded). AIPerf 0.13.0
cannot load it from a folder path: its parallel decode workers
(`aiperf/dataset/generator/parallel_decode.py`, `_init_worker`) set HF_HUB_OFFLINE=1, and offline
`Tokenizer.from_pretrained` (`aiperf/common/tokenizer.py`, `_resolve_local_snapshot`) passes the
name to `huggingface_hub.snapshot_download(local_files_only=True)`, which rejects a path
("Repo id must be in the form 'repo_name' or 'namespace/repo_name'"). So the folder is laid out
as a Hub cache entry (`models--agentx--instant-tokenizer/snapshots/<rev>/`) under a private
HF_HUB_CACHE and named by that repo id, offline. HOME and TMPDIR point into the work folder too,
so AIPerf's dataset cache (`~/.cache/aiperf`) and memory-mapped files stay there.

Client CPU: the whole AIPerf process tree (controller, dataset manager, timing manager, workers,
record processors) is sampled every 0.25 s; its CPU over AIPerf's profiling window (the
`start_time` / `end_time` of its profile export) is the client's CPU, as agentx counts its own
CPU over the run (setup left out). Tokens and requests: AIPerf's own counts over that window
(`total_isl` + `total_osl`, `request_count`).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import threading
import time
from datetime import datetime
from pathlib import Path

import psutil

TOKENIZER_REPO = "agentx/instant-tokenizer"
REVISION = "0" * 40
BLOCK = 512


def find_aiperf(path: str | None) -> str | None:
    """The aiperf executable: `path` if given (None when it is not a file), else `aiperf` on PATH."""
    if path:
        return path if Path(path).is_file() else None
    return shutil.which("aiperf")


def write_tokenizer(hub: Path) -> str:
    """Train a byte-level BPE tokenizer (4,096 ids) on generated words and lay it out as a Hub
    cache entry under `hub`; returns the repo id to pass as `--tokenizer`. " tok" (what the
    instant server streams) is one token, so AIPerf's output count equals the server's."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    rng = random.Random(0)
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = ["".join(rng.choice(letters) for _ in range(rng.randint(2, 9))) for _ in range(3000)] + ["tok"] * 300
    corpus = [" ".join(rng.choice(words) for _ in range(200)) for _ in range(300)]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(corpus, trainers.BpeTrainer(
        vocab_size=4096, special_tokens=["<s>", "</s>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False))
    assert len(tok.encode(" tok tok").ids) == 2, "the streamed word is not one token"
    entry = hub / ("models--" + TOKENIZER_REPO.replace("/", "--"))
    snapshot = entry / "snapshots" / REVISION
    snapshot.mkdir(parents=True, exist_ok=True)
    (entry / "refs").mkdir(exist_ok=True)
    (entry / "refs" / "main").write_text(REVISION)
    tok.save(str(snapshot / "tokenizer.json"))
    (snapshot / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>", "eos_token": "</s>",
        "model_max_length": 1 << 21}))
    return TOKENIZER_REPO


def write_rows(sent: list[tuple[str, int, int]], mooncake: Path, out: Path, limit: int) -> tuple[int, int]:
    """One Mooncake row per request agentx sent ((session, input, output) in send order; at most
    `limit` of them, evenly spaced in that order), with that request's hash ids from the Mooncake
    export of the same traces (matched by session and input length; a request with no match gets
    fresh ids). Returns (rows, matched)."""
    ids: dict[tuple[str, int], list[int]] = {}
    top = 0
    for line in mooncake.read_bytes().splitlines():
        row = json.loads(line)
        ids.setdefault((str(row.get("session_id", "")), row["input_length"]), row["hash_ids"])
        top = max(top, *row["hash_ids"]) if row["hash_ids"] else top
    matched, n = 0, min(limit, len(sent))
    with out.open("w") as f:
        for session, isl, osl in (sent[i * len(sent) // n] for i in range(n)):
            hashes = ids.get((session, isl))
            if hashes is None:
                hashes = list(range(top + 1, top + 1 + -(-isl // BLOCK)))
                top = hashes[-1]
            else:
                matched += 1
            f.write(json.dumps({"input_length": isl, "output_length": max(1, osl), "hash_ids": hashes}) + "\n")
    return n, matched


class TreeCpu(threading.Thread):
    """Samples the CPU seconds (user + system) of a process and all its descendants."""

    def __init__(self, pid: int, every: float = 0.25):
        super().__init__(daemon=True)
        self.root, self.every = psutil.Process(pid), every
        self.last: dict[tuple[int, float], float] = {}  # (pid, create time) -> CPU s when last seen
        self.samples: list[tuple[float, float]] = []  # (unix time, CPU s of the tree so far)
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            try:
                procs = [self.root, *self.root.children(recursive=True)]
            except psutil.Error:
                procs = []
            for p in procs:
                try:
                    t = p.cpu_times()
                    self.last[(p.pid, p.create_time())] = t.user + t.system
                except psutil.Error:
                    pass
            self.samples.append((time.time(), sum(self.last.values())))
            self.done.wait(self.every)

    def between(self, t0: float, t1: float) -> float:
        before = [c for t, c in self.samples if t <= t0]
        after = [c for t, c in self.samples if t >= t1]
        return (after[0] if after else self.samples[-1][1]) - (before[-1] if before else 0.0)


def run_aiperf(exe: str, url: str, rows: Path, work: Path, lanes: int, seconds: float) -> dict:
    """One AIPerf profile of `rows` at `lanes` concurrency for `seconds`; its throughput and
    client CPU over its profiling window."""
    hub = work / "hub"
    repo = write_tokenizer(hub)
    art = work / "artifacts"
    cmd = [exe, "profile", "--model", "instant", "--url", url, "--endpoint-type", "completions", "--streaming",
           "--input-file", str(rows), "--custom-dataset-type", "mooncake_trace", "--tokenizer", repo,
           "--concurrency", str(lanes), "--benchmark-duration", str(seconds), "--benchmark-grace-period", "30",
           "--dataset-sampling-strategy", "shuffle", "--random-seed", "1", "--ui", "none", "--no-server-metrics", "--no-gpu-telemetry",
           "--artifact-dir", str(art)]
    (work / "home").mkdir(exist_ok=True)
    (work / "tmp").mkdir(exist_ok=True)
    env = {**os.environ, "HF_HUB_CACHE": str(hub), "HF_HUB_OFFLINE": "1", "HOME": str(work / "home"),
           "TMPDIR": str(work / "tmp")}
    load = os.getloadavg()[0]
    with (work / "aiperf.log").open("w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
        cpu = TreeCpu(proc.pid)
        cpu.start()
        rc = proc.wait()
        cpu.done.set()
        cpu.join()
    export = art / "profile_export_aiperf.json"
    if rc != 0 or not export.exists():
        tail = (work / "aiperf.log").read_text(errors="replace")[-1500:]
        return {"error": f"aiperf exited {rc}: {tail}"}
    d = json.loads(export.read_text())
    t0, t1 = (datetime.fromisoformat(d[k]).timestamp() for k in ("start_time", "end_time"))
    window_cpu = cpu.between(t0, t1)
    tokens = d["total_isl"]["avg"] + d["total_osl"]["avg"]
    requests = d["request_count"]["avg"]
    errors = sum(int(e.get("count", 0)) for e in d.get("error_summary") or [])
    return {"tok_s": d["total_token_throughput"]["avg"], "req_s": d["request_throughput"]["avg"], "cpu": window_cpu,
            "tok_per_cpu_s": tokens / window_cpu, "req_per_cpu_s": requests / window_cpu,
            "isl_mean": tokens / max(1, requests), "errors": errors, "load": (load + os.getloadavg()[0]) / 2}
