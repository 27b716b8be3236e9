"""The `agentx` command as a user runs it: a real subprocess."""

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import MOONCAKE, WEKA


def agentx(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "agentx.cli", *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=300)


def test_stats_on_the_bundled_default_prints_a_table():
    res = agentx("trace", "stats")
    assert res.returncode == 0, res.stderr
    text = " ".join(res.stdout.split())
    assert "bundled real WEKA traces" in text and "theoretical prefix-cache hit rate 94.4%" in text
    assert "requests 776" in text


def test_stats_json_for_0291():
    res = agentx("trace", "stats", WEKA / "trace_0291.json", "--json")
    doc = json.loads(res.stdout)
    assert doc["requests"] == 32 and doc["streams"]["subagent"] == 2


def test_synth_then_stats_then_convert(tmp_path):
    out = tmp_path / "synth"
    res = agentx("trace", "synth", "--sessions", "6", "--seed", "3", "--out", out)
    assert res.returncode == 0, res.stderr
    assert len(list(out.glob("*.json"))) == 6
    capped = agentx("trace", "stats", out, "--json", "--max-context", "256k")
    assert json.loads(capped.stdout)["isl"]["max"] <= 256_000
    mooncake = tmp_path / "m.jsonl"
    assert agentx("trace", "convert", out, "--to", "mooncake", "--out", mooncake).returncode == 0
    full = json.loads(agentx("trace", "stats", out, "--json").stdout)
    again = json.loads(agentx("trace", "stats", mooncake, "--json").stdout)
    assert again["requests"] == full["requests"] and again["isl"] == full["isl"]
    assert full["sessions_with_subagents"] >= 1
    for to in ("mooncake", "bailian"):  # flat formats: the subagents' trees are not kept, and it says so
        said = " ".join(agentx("trace", "convert", out, "--to", to, "--out", tmp_path / f"x-{to}.jsonl").stdout.split())
        assert f"subagent streams of {full['sessions_with_subagents']:,} sessions" in said, said
        assert f"({full['subagent_requests']:,} requests)" in said and f"{to} has no session tree" in said


def test_convert_mooncake_to_weka_folder(tmp_path):
    res = agentx("trace", "convert", MOONCAKE, "--to", "weka", "--out", tmp_path / "w")
    assert res.returncode == 0, res.stderr
    assert len(list((tmp_path / "w").glob("*.json"))) == 400


def test_bad_input_is_one_line_and_exit_2(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"requests": [{"t": 0, "in": 5, "out": 1, "hash_ids": [1, "a"]}]}')
    res = agentx("trace", "stats", bad)
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and str(bad) in lines[0] and "hash_ids" in lines[0] and "Traceback" not in res.stderr
    missing = agentx("trace", "stats", tmp_path / "nope.json")
    assert missing.returncode == 2 and "no such file" in missing.stderr
    assert agentx("trace", "convert", bad, "--to", "csv", "--out", tmp_path / "x").returncode == 2
    flag = agentx("trace", "stats", "--max-context", "lots")  # a library error, worded as the flag
    assert flag.returncode == 2 and flag.stderr.strip().endswith("--max-context: expected a token count like "
                                                                  "256k or 1m, got 'lots'")
    usage = agentx("trace", "stats", "--bogus")
    assert usage.returncode == 2 and "Traceback" not in usage.stderr


def test_sim_presets_and_bad_sim_settings():
    res = agentx("sim", "presets")
    assert res.returncode == 0 and "MI355X" in res.stdout and "deepseek-v3" in res.stdout
    for args, needle in [
        (("--hardware", "H900"), "unknown hardware preset 'H900'"),
        (("--model", "gpt-9"), "unknown model preset 'gpt-9'"),
        (("--model", "deepseek-v3"), "leaves no KV cache"),  # 671B in BF16 does not fit 8 x H200
        (("--fault-kinds", "meteor"), "unknown fault kind"),
        (("--precision", "nvfp4"), "H200 has no FP4 tensor cores"),  # (other names: the flag's choices)
    ]:
        res = agentx("sim", "serve", "--port", "0", *args)
        assert res.returncode == 2, args
        assert needle in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr


def _commands(command, path=()):
    """(words, click command) of the `agentx` command and every subcommand."""
    yield path, command
    for name, sub in getattr(command, "commands", {}).items():
        yield from _commands(sub, (*path, name))


def test_every_help_page_renders_at_80_columns_with_whole_option_names():
    """Each command's --help as a user at an 80-column terminal gets it: exit 0, no line over
    80, nothing cut, every option name whole, and the exit statuses on bench and report."""
    import click
    import typer.main
    from typer.testing import CliRunner

    from agentx.cli import app

    runner = CliRunner()
    pages = 0
    for words, command in _commands(typer.main.get_command(app)):
        res = runner.invoke(app, [*words, "--help"], env={"COLUMNS": "80"}, terminal_width=80)
        assert res.exit_code == 0, (words, res.output, res.exception)
        assert max(map(len, res.output.splitlines())) <= 80 and "…" not in res.output, words
        for param in command.params:
            if isinstance(param, click.Option):
                assert all(opt in res.output for opt in param.opts), (words, param.opts)
        pages += 1
    assert pages == 29  # every command of every group (update when one is added)
    for words in (["bench"], ["report"]):
        text = " ".join(runner.invoke(app, [*words, "--help"], env={"COLUMNS": "80"}).output.split())
        assert "--allow-invalid" in text and "3 the run is NOT VALID" in text
    proxy = runner.invoke(app, ["capture", "proxy", "--help"], env={"COLUMNS": "80"}).output
    assert "http(s)://host[:port][/prefix]" in proxy  # read as text, not as markup


def test_messages_count_their_nouns(tmp_path):
    res = agentx("trace", "convert", WEKA / "trace_0291.json", "--to", "mooncake", "--out", tmp_path / "one.jsonl")
    assert res.returncode == 0 and "wrote 1 session (32 requests)" in " ".join(res.stdout.split()), res.stdout


def test_plan_without_a_ray_cluster_then_import_what_is_there(tmp_path):
    """`sim plan --ray auto` with no cluster fails in one line before making its folder; `db import
    runs/*/` over a run and a folder holding none stores the run and refuses the other (exit 2)."""
    plan = Path(__file__).parents[1] / "benchmarks" / "plan_example.yaml"
    res = agentx("sim", "plan", plan, "--ray", "auto", "--out", tmp_path / "plan", "--db", tmp_path / "p.db")
    assert res.returncode != 0 and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert "--ray" in res.stderr and not (tmp_path / "plan").exists()
    runs = tmp_path / "runs"
    (runs / "empty").mkdir(parents=True)
    assert agentx("sim", "bench", "--concurrency", "2", "--duration", "30", "--out", runs / "c2").returncode in (0, 3)
    res = agentx("db", "import", runs / "c2", runs / "empty", "--db", tmp_path / "r.db")
    assert res.returncode == 2 and "c2: stored as point 1" in res.stdout
    assert "empty: refused (nothing stored)" in " ".join(res.stderr.split())
