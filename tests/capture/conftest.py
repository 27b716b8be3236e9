"""Shared by the capture tests: the sim, a tokenizer trained here, and two recorded sessions."""

import json
import urllib.request

import pytest

from agentx.capture.export import ExportConfig, export
from agentx.engine.launch import agentx_server, sim_server
from agentx.traces.load import load_sessions
from tests.capture.agent import run_session
from tests.capture.tokenizer import train_tokenizer

STYLES = ("anthropic", "openai")


@pytest.fixture(scope="package")
def sim():
    with sim_server("--speed", "100") as url:
        yield url


@pytest.fixture(scope="package")
def model(sim):
    with urllib.request.urlopen(sim + "/v1/models") as resp:
        return json.load(resp)["data"][0]["id"]


@pytest.fixture(scope="package")
def tokenizer_path(tmp_path_factory):
    return train_tokenizer(tmp_path_factory.mktemp("tok") / "tokenizer.json")


@pytest.fixture(scope="package")
def captured(sim, model, tokenizer_path, tmp_path_factory):
    """Both scripted sessions recorded through one proxy, and their export."""
    root = tmp_path_factory.mktemp("capture")
    store = root / "store.db"
    with agentx_server("capture", "proxy", "--upstream", sim, "--listen", "127.0.0.1:0", "--store", str(store)) as url:
        scripts = {style: run_session(style, url, model, f"{style}-session-7f3e", seed)
                   for seed, style in enumerate(STYLES, 1)}
    report = export(ExportConfig(store=str(store), tokenizer=str(tokenizer_path), out=str(root / "export")))
    sessions = load_sessions([root / "export" / "traces"], None)
    return {"root": root, "store": store, "scripts": scripts, "report": report,
            "sessions": dict(zip(STYLES, sessions))}


