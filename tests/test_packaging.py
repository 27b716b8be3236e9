"""Every data file the package reads ships in its wheel: a file under agentx/ that is not Python
must match a `package-data` pattern of pyproject.toml (an editable install reads the source tree
and would hide a missing one; `pip install .` would not)."""

import fnmatch
import subprocess
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_data_file_is_package_data():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    package_data = config["tool"]["setuptools"]["package-data"]
    tracked = subprocess.run(["git", "ls-files", "agentx"], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout.split()
    data = [Path(p) for p in tracked if not p.endswith(".py")]
    assert data, "git ls-files found no data files under agentx/"

    def shipped(path: Path) -> bool:
        for package, patterns in package_data.items():
            folder = Path(*package.split("."))
            if folder in path.parents:
                rel = path.relative_to(folder).as_posix()
                if any(fnmatch.fnmatchcase(rel, pattern) for pattern in patterns):
                    return True
        return False

    missing = [p.as_posix() for p in data if not shipped(p)]
    assert not missing, f"not in pyproject.toml's package-data: {missing}"
