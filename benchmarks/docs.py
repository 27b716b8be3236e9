"""Every table in README.md and docs/*.md, regenerated from the command that prints it (issue #45).

A document holds each table between two markers; the first names the table, its command, the
commit it was generated at and, for a wall-clock table, the host it ran on:

    <!-- generated: kv-tiers | python benchmarks/kv_policies.py ... --markdown | commit abc1234 -->
    ...what the command printed...
    <!-- end generated -->

The registry below (`TABLES`) is the one place a table's command is written; the generator
rewrites the markers from it. Kinds: `quick` (virtual time or seeded, the same on any host, under a
minute: the CI test re-runs them, tests/test_docs_figures.py), `virtual` (deterministic but slow:
listed by `--check` with their age in commits), `wall` (wall-clock figures: the marker keeps the
host's cores and load average; listed likewise).

    python -m benchmarks.docs                 regenerate every table (slow and wall-clock ones too)
    python -m benchmarks.docs --only NAME ... regenerate these
    python -m benchmarks.docs --quick         regenerate the quick ones
    python -m benchmarks.docs --no-wall       every deterministic one (after a merge on a busy machine)
    python -m benchmarks.docs --check         re-run the quick ones; exit 1 when a document differs
                                              from what the code prints; list the others by age
    python -m benchmarks.docs --list          the registry
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = ("README.md", "docs/*.md")
BEGIN = re.compile(r"^<!-- generated: (?P<name>[\w.-]+) \|(?P<rest>[^\n]*)-->\n", re.M)
END = "<!-- end generated -->"
WRITING = threading.Lock()


@dataclass(frozen=True)
class Table:
    name: str
    command: str  # as a user types it from the repository root: `python ...` or `agentx ...`
    kind: str  # quick | virtual | wall
    fence: bool = False  # plain-text output: pasted in a ``` block

    def argv(self) -> list[str]:
        words = self.command.split()
        if words[0] == "python":
            return [sys.executable, *words[1:]]
        if words[0] == "agentx":
            return [sys.executable, "-m", "agentx.cli", *words[1:]]
        raise ValueError(f"{self.name}: a command starts with python or agentx")


KV = "python benchmarks/kv_policies.py --markdown"
TABLES = (
    Table("plan-example", "python benchmarks/plan_answer.py benchmarks/plan_example.yaml --markdown", "quick"),
    Table("kv-hints", f"{KV} --concurrency 4 8 12 --duration 600", "quick"),
    Table("kv-tiers", f"{KV} --concurrency 8 16 --duration 600 --cpu-offload-gb 100 --ssd-drives 0 8 "
                      "--store-rules on off --points lru:none retain:oracle", "quick"),
    Table("kv-prefetch", f"{KV} --concurrency 8 12 --duration 600 --cpu-offload-gb 1000 "
                         "--points lru:none retain:harness prefetch:harness retain:oracle", "quick"),
    Table("kv-synthetic", f"{KV} --synthetic --max-context 256k --concurrency 8 16 --duration 600 --mem 0.9 "
                          "--cpu-offload-gb 100 --ssd-drives 0 8 --points lru:none retain:harness retain:oracle",
          "virtual"),
    Table("kv-plan", "python benchmarks/plan_answer.py benchmarks/kv_plan.yaml --markdown", "virtual"),
    Table("hybrid", "python benchmarks/hybrid_retention.py --markdown", "virtual"),
    Table("hybrid-plan", "python benchmarks/plan_answer.py benchmarks/plan_hybrid.yaml --markdown", "quick"),
    Table("routers-bundled", "python benchmarks/routers.py --traces bundled --markdown", "quick"),
    Table("routers-synthetic", "python benchmarks/routers.py --traces synthetic --markdown", "virtual"),
    Table("tool-route", "python benchmarks/tool_route.py --markdown", "virtual"),
    Table("calibration", "python benchmarks/calibration.py --workers 2 --markdown", "virtual"),
    Table("anchors", "python benchmarks/anchors.py --markdown", "virtual"),
    Table("rack-scale", "python benchmarks/virtual_time.py --rack-only", "wall", fence=True),
    Table("client-ceiling", "python benchmarks/client_ceiling.py --only-agentic --aiperf /tmp/aiperf-venv/bin/aiperf",
          "wall", fence=True),
    Table("dashboard", "python benchmarks/dashboard.py", "wall", fence=True),
    Table("virtual-cost", "python benchmarks/virtual_time.py", "wall", fence=True),
)
BY_NAME = {t.name: t for t in TABLES}


@dataclass(frozen=True)
class Block:
    path: Path
    name: str
    header: str  # the whole first marker line
    start: int  # offset of the body
    end: int  # offset of the end marker
    body: str


def documents(root: Path = ROOT) -> dict[Path, str]:
    paths = [p for pattern in DOCUMENTS for p in sorted(root.glob(pattern))]
    return {p: p.read_text() for p in paths}


def blocks(path: Path, text: str) -> list[Block]:
    found = []
    for m in BEGIN.finditer(text):
        end = text.find(END, m.end())
        if end < 0:
            raise SystemExit(f"{path}: table {m['name']!r} has no `{END}`")
        found.append(Block(path, m["name"], m.group(0), m.end(), end, text[m.end():end]))
    return found


def all_blocks(docs: dict[Path, str]) -> dict[str, Block]:
    """Every generated block by name; a name twice, or not in the registry, is an error."""
    out: dict[str, Block] = {}
    for path, text in docs.items():
        for b in blocks(path, text):
            if b.name in out:
                raise SystemExit(f"{path}: table {b.name!r} also in {out[b.name].path}")
            if b.name not in BY_NAME:
                raise SystemExit(f"{path}: table {b.name!r} is not in benchmarks/docs.py's TABLES")
            out[b.name] = b
    return out


def run(table: Table, root: Path = ROOT) -> str:
    """The table's body as the document holds it: the command's stdout (fenced if plain text)."""
    res = subprocess.run(table.argv(), cwd=root, capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"{table.name}: `{table.command}` exited {res.returncode}:\n{res.stderr[-3000:]}")
    out = res.stdout.strip("\n") + "\n"
    return f"```\n{out}```\n" if table.fence else out


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout.strip()


def commit() -> str:
    head = git("rev-parse", "--short", "HEAD") or "unknown"
    return head + ("+local" if git("status", "--porcelain", "--", "agentx", "benchmarks") else "")


def header(table: Table, stamp: str) -> str:
    host = ""
    if table.kind == "wall":
        host = f" | host {os.cpu_count()} cores, load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}"
    return f"<!-- generated: {table.name} | {table.command} | commit {stamp}{host} -->\n"


def differences(docs: dict[Path, str], outputs: dict[str, str]) -> list[str]:
    """A unified diff per table whose document body differs from what its command printed."""
    found = all_blocks(docs)
    out = []
    for name, printed in outputs.items():
        b = found.get(name)
        if b is None:
            out.append(f"{name}: no generated block in README.md or docs/")
        elif b.body != printed:
            diff = difflib.unified_diff(b.body.splitlines(), printed.splitlines(), f"{b.path.name} ({name})",
                                        f"`{BY_NAME[name].command}`", lineterm="", n=0)
            out.append("\n".join(diff))
    return out


def age(b: Block) -> str:
    if not b.body:
        return "not generated yet"
    m = re.search(r"commit (\w+)", b.header)
    sha = m[1] if m else ""
    count = git("rev-list", "--count", f"{sha}..HEAD") if sha and sha != "unknown" else ""
    return f"commit {sha or '?'}, {count or '?'} commits ago"


def write(outputs: dict[str, str], stamp: str, root: Path = ROOT) -> None:
    """Paste each output into its block and stamp its marker with the commit that printed it, reading
    the documents afresh (a long run must not undo an edit made meanwhile)."""
    docs = documents(root)
    found = all_blocks(docs)
    for path, text in docs.items():
        mine = sorted((b for b in found.values() if b.path == path and b.name in outputs), key=lambda b: -b.start)
        for b in mine:
            table = BY_NAME[b.name]
            head_at = b.start - len(b.header)
            text = text[:head_at] + header(table, stamp) + outputs[b.name] + text[b.end:]
        if mine:
            path.write_text(text)


def generate(names: list[str], jobs: int, stamp: str | None = None) -> dict[str, str]:
    """Each table's printed body; with a stamp, each is written into its document as soon as it is
    done (a failure later loses nothing done before it)."""
    def one(name: str) -> tuple[str, str | None]:
        try:
            body = run(BY_NAME[name])
        except RuntimeError as e:
            print(e, file=sys.stderr, flush=True)
            return name, None
        if stamp is not None:
            with WRITING:
                write({name: body}, stamp)
                print(f"{name}: written", flush=True)
        return name, body

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        return {name: body for name, body in pool.map(one, names) if body is not None}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", nargs="+", default=None, metavar="NAME", choices=list(BY_NAME))
    ap.add_argument("--quick", action="store_true", help="Only the quick deterministic tables.")
    ap.add_argument("--no-wall", action="store_true", help="Every table but the wall-clock ones.")
    ap.add_argument("--check", action="store_true", help="Re-run the quick tables and compare; write nothing.")
    ap.add_argument("--list", action="store_true", help="Print the registry.")
    ap.add_argument("--jobs", type=int, default=1, help="Tables run at once (wall-clock ones always alone).")
    args = ap.parse_args(argv)
    docs = documents()
    found = all_blocks(docs)
    if args.list:
        for t in TABLES:
            where = found[t.name].path.relative_to(ROOT) if t.name in found else "(no block)"
            print(f"{t.name:<18} {t.kind:<8} {where}  {t.command}")
        return 0
    missing = [t.name for t in TABLES if t.name not in found]
    if missing:
        print(f"no generated block for: {', '.join(missing)}", file=sys.stderr)
    names = args.only or [t.name for t in TABLES if t.kind == "quick" or not (args.quick or args.check)
                          and not (args.no_wall and t.kind == "wall")]
    if args.check:
        printed = generate(names, args.jobs)
        diffs = differences(docs, printed) + [f"{n}: its command failed (above)" for n in names if n not in printed]
        print("\n\n".join(diffs) if diffs else f"{len(names)} quick tables match what the code prints")
        print("not re-run here (slow or wall-clock):")
        for t in TABLES:
            if t.name not in names and t.name in found:
                print(f"  {t.name:<18} {t.kind:<8} {age(found[t.name])}  {found[t.name].path.relative_to(ROOT)}")
        return 1 if diffs or missing else 0
    stamp = commit()  # the code that runs: taken before, as a long run may outlast a commit
    calm = [n for n in names if BY_NAME[n].kind != "wall"]
    outputs = generate(calm, args.jobs, stamp) | generate([n for n in names if n not in calm], 1, stamp)
    failed = [n for n in names if n not in outputs]
    print(f"regenerated {len(outputs)} tables at commit {stamp}: {', '.join(outputs)}"
          + (f"; FAILED: {', '.join(failed)}" if failed else ""))
    return 1 if missing or failed else 0


if __name__ == "__main__":
    sys.exit(main())
