"""Malformed and hostile inputs of the results layer and the capture import, as a hostile user
would hand them over: run folders, AIPerf artifact sets, recipes, session logs. Each case is a
(name, make) pair; `make(folder)` writes the input under `folder` and returns the path to hand
over. Shared by tests/test_hardening.py (a sample of each surface) and benchmarks/hostile_inputs.py
(all of them, with a table of outcomes)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Callable

Case = tuple[str, Callable[[Path], Path]]

RAW = {"NaN": "NaN", "Infinity": "Infinity", "-Infinity": "-Infinity", "1e400": "1e400"}  # JSON text, not values
DEEP_ARRAY = "[" * 10_000 + "]" * 10_000
DEEP_OBJECT = '{"a":' * 10_000 + "1" + "}" * 10_000

INT_VALUES = ["many", [1], {"a": 1}, 1e30, 2**70, -5, 1.5, True, *RAW]
STR_VALUES = [[1], {"a": 1}, 5, "x" * 100_000, "a\x00b", True, *RAW]
FLOAT_VALUES = ["many", [1], {"a": 1}, 1e30, -1e300, True, *RAW]
BOOL_VALUES = ["many", 5, [1], {"a": 1}, *RAW]


def _set(doc: dict, path: str, value) -> None:
    keys = path.split(".")
    for k in keys[:-1]:
        if not isinstance(doc.get(k), dict):
            doc[k] = {}
        doc = doc[k]
    doc[keys[-1]] = value


def _dump(value) -> str:
    """JSON text; a RAW marker becomes its bare token."""
    text = json.dumps(value)
    for marker, token in RAW.items():
        text = text.replace(json.dumps(marker), token)
    return text


def _copy(base: Path, folder: Path) -> Path:
    """A copy of the run with a run id of its own (so that one database can take every case)."""
    run = folder / "run"
    shutil.copytree(base, run)
    info = json.loads((run / "run.json").read_text())
    info["run_id"] = f"{info['run_id'][:40]}-{folder.name[-12:]}".replace("_", "-")
    (run / "run.json").write_text(json.dumps(info))
    return run


def _field_case(base: Path, file: str, path: str, value) -> Case:
    def make(folder: Path) -> Path:
        run = _copy(base, folder)
        doc = json.loads((run / file).read_text())
        _set(doc, path, value)
        (run / file).write_text(_dump(doc))
        return run
    return f"{file} {path} = {str(value)[:20]!r}", make


def _file_case(base: Path, name: str, file: str, write: Callable[[Path], None]) -> Case:
    def make(folder: Path) -> Path:
        run = _copy(base, folder)
        target = run / file
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        elif target.exists() or target.is_symlink():
            target.unlink()
        write(target)
        return run
    return f"{file}: {name}", make


def _text(content: str | bytes):
    def write(path: Path) -> None:
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return write


def _structural(file_limit: int) -> list[tuple[str, Callable[[Path], None]]]:
    """Ways to break any one file of a folder."""
    return [
        ("empty", _text(b"")), ("binary", _text(bytes(range(256)) * 40)), ("not JSON", _text("{not json")),
        ("a list", _text("[]")), ("a number", _text("5")), ("null", _text("null")),
        ("truncated", _text('{"a": [1, 2')), ("deep array", _text(DEEP_ARRAY)), ("deep object", _text(DEEP_OBJECT)),
        ("invalid UTF-8", _text(b'{"a": "\xff\xfe"}')), ("lone surrogate", _text('{"a": "\\ud800"}')),
        ("a folder", lambda p: p.mkdir()), ("a FIFO", lambda p: os.mkfifo(p)),
        ("a symlink loop", lambda p: p.symlink_to(p.name)), ("a dangling symlink", lambda p: p.symlink_to("nowhere")),
        ("over its size bound", lambda p: _sparse(p, file_limit + 1)),
    ]


def _sparse(path: Path, size: int) -> None:
    with open(path, "wb") as f:
        f.truncate(size)


RESULT_FIELDS = {  # result.json field -> kind
    "schema_version": "int", "identity.gpus": "int", "identity.concurrency": "int", "identity.model": "str",
    "identity.hardware": "str", "identity.engine": "str", "identity.dataset": "str", "identity.clock_scale": "float",
    "requests.total": "int", "requests.succeeded": "int", "requests.errors": "str", "validity.valid": "bool",
    "provenance.run_id": "str", "provenance.start_time": "str", "request_metrics.ttft_s.p50": "float",
    "request_metrics.throughput.total_tok_s_per_gpu": "float", "server_metrics.prefix_hit_rate": "float",
}
VALUES = {"int": INT_VALUES, "str": STR_VALUES, "float": FLOAT_VALUES, "bool": BOOL_VALUES}


def _jsonl_line_case(base: Path, name: str, edit: Callable[[list[str]], list[str]]) -> Case:
    def make(folder: Path) -> Path:
        run = _copy(base, folder)
        (run / "records.parquet").unlink()
        lines = (run / "records.jsonl").read_text().splitlines()
        (run / "records.jsonl").write_text("\n".join(edit(lines)) + "\n")
        return run
    return f"records.jsonl: {name}", make


def _record_field(field: str, value) -> Callable[[list[str]], list[str]]:
    def edit(lines: list[str]) -> list[str]:
        row = json.loads(lines[1])
        row[field] = value
        return [lines[0], _dump(row), *lines[2:]]
    return edit


def _parquet_case(base: Path, name: str, change: Callable) -> Case:
    def make(folder: Path) -> Path:
        import pyarrow as pa
        import pyarrow.parquet as pq

        run = _copy(base, folder)
        table = pq.read_table(run / "records.parquet")
        pq.write_table(change(table, pa), run / "records.parquet")
        return run
    return f"records.parquet: {name}", make


def _replace_column(name: str, values) -> Callable:
    def change(table, pa):
        column = pa.array([values(i) for i in range(table.num_rows)])
        return table.set_column(table.column_names.index(name), name, column)
    return change


def run_folder_cases(base: Path) -> list[Case]:
    """Hostile copies of the real run folder `base` (a finished run: records.parquet beside the JSONL)."""
    from agentx.results.runschema import MAX_JSON_FILE, MAX_RECORDS_FILE

    cases: list[Case] = []
    for path, kind in RESULT_FIELDS.items():
        cases += [_field_case(base, "result.json", path, v) for v in VALUES[kind]]
    for path, kind in {"run_id": "str", "settings.clock_scale": "float", "settings.token_scale": "int"}.items():
        cases += [_field_case(base, "run.json", path, v) for v in VALUES[kind]]
    cases += [_field_case(base, "run.json", "run_id", v) for v in ("../../etc", "x" * 65, "")]
    cases += [_field_case(base, "result.json", key, v) for key in ("identity", "request_metrics", "validity",
                                                                    "requests") for v in ([1], 5, "x")]
    for file, limit in (("result.json", MAX_JSON_FILE), ("run.json", MAX_JSON_FILE)):
        cases += [_file_case(base, name, file, write) for name, write in _structural(limit)]
    for field, kind in {"isl": "int", "start": "float", "end": "float", "lane": "int", "session": "str",
                        "status": "int", "ttft": "float"}.items():
        cases += [_jsonl_line_case(base, f"line 2 {field} = {str(v)[:20]!r}", _record_field(field, v))
                  for v in VALUES[kind]]
    cases += [
        _jsonl_line_case(base, "a line that is a list", lambda ls: [ls[0], "[1, 2]", *ls[2:]]),
        _jsonl_line_case(base, "a line that is a number", lambda ls: [ls[0], "5", *ls[2:]]),
        _jsonl_line_case(base, "a bad line in the middle", lambda ls: [ls[0], "{not json", *ls[2:]]),
        _jsonl_line_case(base, "NUL bytes", lambda ls: [ls[0], "\x00" * 1000, *ls[2:]]),
        _jsonl_line_case(base, "half the records", lambda ls: ls[: len(ls) // 2]),
        _jsonl_line_case(base, "no records", lambda ls: []),
        _jsonl_line_case(base, "a 20 MB line", lambda ls: [ls[0], "a" * (20 << 20), *ls[2:]]),
        _jsonl_line_case(base, "a deep line", lambda ls: [ls[0], DEEP_OBJECT, *ls[2:]]),
    ]
    without_parquet = [(n, w) for n, w in _structural(MAX_RECORDS_FILE) if n != "over its size bound"]
    for name, write in without_parquet:
        cases.append(_file_case(base, name, "records.parquet", write))
    cases += [
        _parquet_case(base, "isl as text", _replace_column("isl", lambda i: "many")),
        _parquet_case(base, "isl 1e30", _replace_column("isl", lambda i: 1e30)),
        _parquet_case(base, "isl -5", _replace_column("isl", lambda i: -5)),
        _parquet_case(base, "start infinite", _replace_column("start", lambda i: float("inf"))),
        _parquet_case(base, "session 10k characters", _replace_column("session", lambda i: "s" * 10_000)),
        _parquet_case(base, "no isl column", lambda t, pa: t.drop_columns(["isl"])),
        _parquet_case(base, "no rows", lambda t, pa: t.slice(0, 0)),
    ]
    cases += [_file_case(base, name, "server_metrics.jsonl", write) for name, write in (
        ("a bad line", _text('{"t": 1, "phase": "run", "samples": {}}\n{bad\n{"t": 2}\n')),
        ("t negative", _text('{"t": -1, "samples": {}}\n')), ("samples a list", _text('{"t": 1, "samples": [1]}\n')),
        ("a FIFO", lambda p: os.mkfifo(p)), ("a folder", lambda p: p.mkdir()),
        ("t 1e12 (a grid of 10^12 points)", _text('{"t": 1e12, "samples": {}}\n')))]
    cases += [_file_case(base, name, "dataset.json", write) for name, write in (
        ("not JSON", _text("{x")), ("stats missing", _text('{"version": 1}')),
        ("sessions wrong", _text('{"version": 1, "stats": {}, "sessions": {"id": 5}}')),
        ("deep", _text(DEEP_OBJECT)), ("a FIFO", lambda p: os.mkfifo(p)))]
    return cases


# --- AIPerf artifact sets ------------------------------------------------------------------------

def _aiperf_line_case(base: Path, path: str, value) -> Case:
    def make(folder: Path) -> Path:
        run = folder / "aiperf"
        shutil.copytree(base, run)
        lines = (run / "profile_export.jsonl").read_text().splitlines()
        row = json.loads(lines[2])
        _set(row, path, value)
        lines[2] = _dump(row)
        (run / "profile_export.jsonl").write_text("\n".join(lines) + "\n")
        return run
    return f"profile_export.jsonl line 3 {path} = {str(value)[:20]!r}", make


def _aiperf_doc_case(base: Path, file: str, path: str, value) -> Case:
    def make(folder: Path) -> Path:
        run = folder / "aiperf"
        shutil.copytree(base, run)
        doc = json.loads((run / file).read_text())
        _set(doc, path, value)
        (run / file).write_text(_dump(doc))
        return run
    return f"{file} {path} = {str(value)[:20]!r}", make


def _aiperf_file_case(base: Path, name: str, file: str, write) -> Case:
    def make(folder: Path) -> Path:
        run = folder / "aiperf"
        shutil.copytree(base, run)
        (run / file).unlink()
        write(run / file)
        return run
    return f"{file}: {name}", make


def aiperf_cases(base: Path) -> list[Case]:
    from agentx.results.runschema import MAX_JSON_FILE, MAX_RECORDS_FILE

    cases: list[Case] = []
    for path, kind in {"metadata.request_start_ns": "int", "metadata.request_end_ns": "int",
                       "metadata.x_correlation_id": "str", "metadata.worker_id": "str",
                       "metrics.time_to_first_token.value": "float", "metrics.input_sequence_length.value": "float",
                       "metrics.usage_prompt_cache_read_tokens.value": "float", "metadata.agent_depth": "int"}.items():
        values = [v for v in VALUES[kind] if not (kind == "str" and isinstance(v, int) and not isinstance(v, bool))]
        cases += [_aiperf_line_case(base, path, v) for v in values]
    cases += [_aiperf_line_case(base, p, v) for p, v in (
        ("metadata.request_start_ns", 10**30), ("metrics.input_sequence_length.value", -5),
        ("metrics.time_to_first_token.value", -1e300), ("metrics.time_to_first_token", {"unit": "ms"}),
        ("metadata", [1]), ("metrics", "x"))]
    cases += [_aiperf_doc_case(base, "profile_export_aiperf.json", p, v) for p, v in (
        ("benchmark_id", [1]), ("benchmark_id", {"a": 1}), ("benchmark_id", "../" * 30),
        ("theoretical_prefix_cache_hit.avg", "NaN"), ("theoretical_prefix_cache_hit.avg", "x"),
        ("input_config.phases", "x"), ("input_config", [1]), ("is_complete", "yes"),
        ("input_config.models.items", [{"name": ["m"]}]), ("run_info.random_seed", 1e30))]
    cases += [_aiperf_doc_case(base, "server_metrics_export.json", p, v) for p, v in (
        ("metrics", [1]), ("metrics.vllm:num_requests_running.series", [{"stats": {"avg": "x"}}]),
        ("summary.endpoint_info", {"u": {"total_fetches": -1}}))]
    for file, limit in (("profile_export.jsonl", MAX_RECORDS_FILE), ("profile_export_aiperf.json", MAX_JSON_FILE)):
        cases += [_aiperf_file_case(base, name, file, write) for name, write in _structural(limit)
                  if name != "over its size bound" or limit == MAX_JSON_FILE]
    return cases


# --- recipes -------------------------------------------------------------------------------------

RECIPE = {"name": "x", "duration": 60, "concurrency": [1, 2], "seed": 0, "dataset": {"max_context": "256k"},
          "bench": {"grace": 5, "warmup_requests_per_lane": 2, "wire": "tokens", "token_range": [1000, 2000]},
          "deployments": [{"name": "a", "url": "http://127.0.0.1:9", "health_timeout": 30, "clock_scale": 2,
                           "labels": {"gpus": 8, "model": "m"}},
                          {"name": "b", "sim": {"speed": 20, "gpus": 8}},
                          {"name": "c", "command": "serve --port {port}"}]}
RECIPE_FIELDS = {  # key -> hostile values (each one a recipe must refuse)
    "name": ["../../../../escaped", "x" * 300, "a\x00b", ".hidden", "", [1], 5],
    "duration": [".nan", ".inf", "-.inf", -1, 0, 1e308, "soon", [1]],
    "concurrency": [[], [0], [-1], [1e12], [10**12], "many", [[1]], list(range(1000))],
    "seed": [-1, 1.5, "x", 2**70],
    "deployments": [[], "x", [1], [{"name": "a"}]],
    "deployments.0.name": ["../x", "x" * 300, "a/b", "a\x00", ".", [1]],
    "deployments.0.url": ["file:///etc/passwd", "u", 5, "http://a b", "x" * 5000],
    "deployments.0.health_timeout": [".nan", -1, 0, 1e9, "soon"],
    "deployments.0.clock_scale": [".nan", -1, 0, ".inf"],
    "deployments.0.labels.gpus": ["eight", 0, -8, 1e20, 10**20],
    "deployments.0.labels.model": ["x" * 300, [1], {"a": 1}],
    "deployments.0.colour": ["red"],
    "deployments.1.sim.speed": ["fast", -1, 1e12],
    "deployments.1.sim.gpus": ["eight", 0, 1e9],
    "deployments.2.command": ["serve --port 8000", "x\x00", "x" * 20_000],
    "dataset.max_context": ["lots", "-5", [1]],
    "dataset.scenario": ["9k9k", [1]],
    "dataset.traces": ["x", [5]],
    "bench.grace": ["soon", -1, ".nan", 1e30, [1]],
    "bench.warmup_requests_per_lane": [-1, 1.5, "many", 10**9],
    "bench.wire": ["carrier pigeon", 5],
    "bench.token_range": [[5, 1], "1:2", [1, 2, 3], [-1, 5]],
    "bench.token_scale": [0, -1],
    "bench.max_context": ["256k"],
    "bench.warp": [9],
}


def _yaml_value(value) -> str:
    if isinstance(value, str) and value.startswith((".nan", ".inf", "-.inf")):
        return value
    return json.dumps(value)  # JSON is YAML


def _set_path(doc, path: str, value) -> None:
    keys = path.split(".")
    for k in keys[:-1]:
        doc = doc[int(k)] if k.isdigit() else doc.setdefault(k, {})
    last = keys[-1]
    if last.isdigit():
        doc[int(last)] = value
    else:
        doc[last] = value


def _recipe_case(path: str, value) -> Case:
    def make(folder: Path) -> Path:
        doc = json.loads(json.dumps(RECIPE))
        marker = "@@VALUE@@"
        _set_path(doc, path, marker)
        file = folder / "recipe.yaml"
        file.write_text(json.dumps(doc).replace(json.dumps(marker), _yaml_value(value)))
        return file
    return f"{path} = {str(value)[:20]!r}", make


def recipe_cases() -> list[Case]:
    cases = [_recipe_case(path, v) for path, values in RECIPE_FIELDS.items() for v in values]

    def raw(name: str, content) -> Case:
        def make(folder: Path) -> Path:
            file = folder / "recipe.yaml"
            if callable(content):
                content(file)
            else:
                file.write_bytes(content if isinstance(content, bytes) else content.encode())
            return file
        return name, make

    cases += [raw(n, c) for n, c in (
        ("binary", bytes(range(256)) * 10), ("invalid UTF-8", b"name: \xff\xfe\n"), ("empty", b""),
        ("a list", "[1, 2]"), ("100k-deep flow", "[" * 100_000 + "]" * 100_000),
        ("deep blocks", "".join(" " * i + f"k{i}:\n" for i in range(1200))),
        ("alias bomb", "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
                       "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: [*c, *c, *c, *c, *c, *c, *c, *c, *c]\n"),
        ("not YAML", "name: [x\n"), ("a NUL", "name: x\x00\n"), ("2 MB", "# " + "x" * (2 << 20) + "\n"),
        ("a folder", lambda p: p.mkdir()), ("a FIFO", lambda p: os.mkfifo(p)),
        ("a symlink loop", lambda p: p.symlink_to(p.name)), ("missing", lambda p: None))]
    return cases


# --- session logs --------------------------------------------------------------------------------

def _log_case(store: str, name: str, edit: Callable[[Path], Path]) -> Case:
    def make(folder: Path) -> Path:
        from tests.capture.agentlogs_files import claude_store, codex_store

        root = folder / "logs"
        (claude_store if store == "claude" else codex_store)(root)
        return edit(root)
    return f"{store}: {name}", make


def _first(root: Path, pattern: str = "*.jsonl") -> Path:
    return sorted(root.rglob(pattern))[0]


def _line_edit(transform: Callable[[dict], dict | str | bytes], which: str = "assistant"):
    """Rewrite the first record whose `type` is `which` (or any, for None)."""
    def edit(root: Path) -> Path:
        file = _first(root)
        lines = file.read_bytes().split(b"\n")
        for i, line in enumerate(lines):
            if not line.strip():
                continue
            row = json.loads(line)
            if which in (None, row.get("type")):
                out = transform(row)
                lines[i] = out if isinstance(out, bytes) else (out if isinstance(out, str) else _dump(out)).encode()
                break
        file.write_bytes(b"\n".join(lines))
        return root
    return edit


def _with(path: str, value):
    def transform(row: dict) -> dict:
        _set(row, path, value)
        return row
    return transform


def _deep_content(row: dict) -> str:
    """The message's content 500 levels deep (as text: json.dumps itself stops near 1000 levels)."""
    row["message"]["content"] = "@@DEEP@@"
    deep = '[{"type": "text", "text": ' * 500 + '"x"' + "}]" * 500
    return _dump(row).replace('"@@DEEP@@"', deep)


def log_cases() -> list[Case]:
    cases: list[Case] = []
    for path, values in {"sessionId": [[1], {"a": 1}, 5], "agentId": [[1], {"a": 1}],
                         "message.model": [[1], {"a": 1}], "message.id": [[1], {"a": 1}],
                         "message.usage.output_tokens": [1e30, -1, "many", 10**30, *RAW],
                         "message.usage.input_tokens": [1e30, -1, "many"], "message.usage": [[1], "x"],
                         "message.content": [5, {"a": 1}, [[1]], [{"type": [1]}], [{"type": {"a": 1}}]],
                         "timestamp": ["yesterday", [1], 1e30], "message": [5, [1]],
                         "isSidechain": ["yes"], "parentUuid": [[1]]}.items():
        cases += [_log_case("claude", f"{path} = {str(v)[:20]!r}", _line_edit(_with(path, v))) for v in values]
    cases += [_log_case("claude", "content 500 deep", _line_edit(_deep_content)),
              _log_case("claude", "lone surrogate", _line_edit(
                  lambda r: _dump(_with("message.content", "@@S@@")(r)).replace('"@@S@@"', '"\\ud800"'), "user")),
              _log_case("claude", "binary line", _line_edit(lambda r: bytes(range(256)), None)),
              _log_case("claude", "invalid UTF-8", _line_edit(lambda r: b'{"type": "user", "x": "\xff"}', None)),
              _log_case("claude", "a 20 MB line", _line_edit(lambda r: "x" * (20 << 20), None)),
              _log_case("claude", "a NaN token", _line_edit(lambda r: _dump(r).replace("{", '{"n": NaN, ', 1)))]
    for path, values in {"payload.id": [[1], {"a": 1}], "payload.model": [[1]],
                         "payload.source.subagent.thread_spawn.parent_thread_id": [[1], {"a": 1}],
                         "payload.info.last_token_usage.input_tokens": [1e30, -3, "x", 10**30],
                         "payload": [[1], "x"], "timestamp": ["soon", [1]]}.items():
        which = "session_meta" if path in ("payload.id", "payload.source.subagent.thread_spawn.parent_thread_id") \
            else "turn_context" if path == "payload.model" else "event_msg" if "token" in path else None
        cases += [_log_case("codex", f"{path} = {str(v)[:20]!r}", _line_edit(_with(path, v), which)) for v in values]

    def replace_store(make_path: Callable[[Path], Path]):
        def edit(root: Path) -> Path:
            return make_path(root)
        return edit

    def folder_jsonl(root):
        (root / "dir.jsonl").mkdir()
        return root

    def loop(root):
        (root / "loop.jsonl").symlink_to("loop.jsonl")
        return root / "loop.jsonl"

    def fifo(root):
        os.mkfifo(root / "fifo.jsonl")
        return root / "fifo.jsonl"

    def dir_loop(root):
        (root / "sub").mkdir()
        (root / "sub" / "up").symlink_to("..")
        return root

    cases += [_log_case("claude", n, replace_store(f)) for n, f in (
        ("a folder named *.jsonl", folder_jsonl), ("a symlink loop", loop), ("a FIFO", fifo),
        ("a folder symlink loop", dir_loop), ("a missing path", lambda r: r / "missing"),
        ("a file name with a newline", lambda r: _renamed(r, "bad\nname.jsonl")))]
    return cases


def _renamed(root: Path, name: str) -> Path:
    file = _first(root)
    target = file.parent / name
    file.rename(target)
    target.write_text(target.read_text() + "{not json\n")
    return target
