"""A trace path that is there but is no file (issue #46: /dev/zero was "no such file")."""

import os
import subprocess
import sys

import pytest

from agentx.errors import TraceError
from agentx.traces.load import trace_files


def test_a_device_a_fifo_and_a_loop_are_named_for_what_they_are(tmp_path):
    fifo, loop = tmp_path / "fifo.jsonl", tmp_path / "loop.jsonl"
    os.mkfifo(fifo)
    loop.symlink_to(loop.name)
    for path, why in (("/dev/zero", "not a regular file (a device)"), (fifo, "not a regular file (a FIFO)"),
                      (loop, "a symlink loop"), (tmp_path / "nope.csv", "no such file or folder")):
        with pytest.raises(TraceError) as err:
            trace_files([path])
        assert str(err.value) == f"{path}: {why}"
    res = subprocess.run([sys.executable, "-m", "agentx.cli", "trace", "stats", "/dev/zero"], capture_output=True,
                         text=True, timeout=120)
    assert res.returncode == 2 and res.stderr == "error: /dev/zero: not a regular file (a device)\n", res.stderr
