"""The package's structure, checked on its source (no module is imported): imports go only down
the stages, no import circle at any depth, no source file over 450 lines and no function over 60.

The stages, from the top: each may import its own stage and those below it, never one above.
They are the import graph of the package as it is (what imports what); a new arrow up is a
design change, made here on purpose, not a line that slips in."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "agentx"

STAGES = [
    "cli",  # the `agentx` command: parses, calls, prints
    "report",  # HTML pages of runs, sweeps, plans and the database
    "virtual",  # replay in modeled time: `sim bench`, capacity plans, the twin
    "results",  # the results database, sweep recipes, frontiers, the REST API
    "replay",  # the real-time replay: plan, renderer, driver, its HTTP client and workers
    "power",  # power readings beside a run
    "metrics",  # summaries, validity, tables, server metrics
    "capture",  # recording agent traffic and exporting it as traces
    "content",  # the requests' token content and wire bodies
    "engine",  # the simulated engine and its HTTP shell
    "traces",  # trace formats and the trace model
    "records", "options", "serving", "userfiles", "common", "data",  # shared leaves
    "errors",
    "agentx",  # the package's own __init__ (its version)
]
MAX_FILE_LINES = 450
MAX_FUNCTION_LINES = 60
SOURCE_SUFFIXES = (".py", ".j2")  # written by hand (not data tables, vendored or generated bundles)


@dataclass(frozen=True)
class Import:
    source: str  # the importing module
    target: str  # the module of this package it names
    line: int
    lazy: bool  # inside a function: made when called, not when the module loads


def _module(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _resolve(name: str) -> str | None:
    """The module of this package that `name` is or lies in (None: not this package's)."""
    while name:
        if name in MODULES:
            return name
        name = name.rpartition(".")[0]
    return None


def _imports_of(module: str, path: Path) -> list[Import]:
    tree = ast.parse(path.read_text(), str(path))
    lazy_nodes = {id(n) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                  for n in ast.walk(f)}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            base = node.module if node.level == 0 else _relative(module, path, node)
            names = [f"{base}.{a.name}" for a in node.names]  # a module of the package, or a name in `base`
        else:
            continue
        for name in names:
            target = _resolve(name)
            if target is not None and target != module:
                out.append(Import(module, target, node.lineno, id(node) in lazy_nodes))
    return out


def _relative(module: str, path: Path, node: ast.ImportFrom) -> str:
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for _ in range(node.level - 1):
        package = package.rpartition(".")[0]
    return f"{package}.{node.module}"


IMPORTS = [i for m, p in MODULES.items() for i in _imports_of(m, p)]


def _stage(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected parts of more than one node (Tarjan's algorithm), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                part.append(w)
                if w == v:
                    break
            if len(part) > 1:
                found.append(sorted(part))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def _rooms(folder: str) -> dict[str, set[str]]:
    """The folder's direct parts (its modules, its sub-packages each as one) and which part's
    imports (made when a module loads, or lazily) reach which other part."""
    prefix = folder + "."
    edges: dict[str, set[str]] = {}
    for i in IMPORTS:
        if i.source.startswith(prefix) and i.target.startswith(prefix):
            a = prefix + i.source[len(prefix):].split(".")[0]
            b = prefix + i.target[len(prefix):].split(".")[0]
            if a != b:
                edges.setdefault(a, set()).add(b)
    return edges


def test_the_stages_name_every_part_of_the_package():
    assert sorted({_stage(m) for m in MODULES}) == sorted(STAGES)


def test_imports_go_only_down_the_stages():
    rank = {s: i for i, s in enumerate(STAGES)}
    up = [f"{MODULES[i.source].relative_to(ROOT)}:{i.line}: {i.source} imports {i.target} "
          f"({_stage(i.source)} is below {_stage(i.target)})"
          for i in IMPORTS if rank[_stage(i.source)] > rank[_stage(i.target)]]
    assert not up, "imports up the stages:\n" + "\n".join(up)


def test_no_module_imports_itself_back_when_it_loads():
    """Modules in a circle of load-time imports (`import` at module level, at any depth)."""
    edges: dict[str, set[str]] = {}
    for i in IMPORTS:
        if not i.lazy:
            edges.setdefault(i.source, set()).add(i.target)
    assert _circles(edges) == []


def test_no_circle_between_the_parts_of_any_folder():
    """In every folder (the package, and each package in it), its modules and sub-packages,
    each taken whole, import one another without a circle, lazy imports included."""
    folders = {_module(p.parent / "__init__.py") for p in MODULES.values()}
    circles = {f: c for f in sorted(folders) if (c := _circles(_rooms(f)))}
    assert circles == {}


def test_no_source_file_is_over_450_lines():
    long = {str(p.relative_to(ROOT)): n for p in sorted(PACKAGE.rglob("*"))
            if p.suffix in SOURCE_SUFFIXES and (n := len(p.read_text().splitlines())) > MAX_FILE_LINES}
    assert long == {}


def test_no_function_is_over_60_lines():
    long = {}
    for module, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long[f"{path.relative_to(ROOT)}:{node.lineno} {node.name}"] = lines
    assert long == {}
