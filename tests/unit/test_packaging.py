"""The wheel's package list is written out (to ship web/ as streaming/web): keep it whole."""

from __future__ import annotations

import tomllib
from pathlib import Path

from setuptools import find_namespace_packages

ROOT = Path(__file__).resolve().parents[2]


def test_every_package_is_listed_and_the_page_ships_inside_streaming():
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    found = {
        name
        for name in find_namespace_packages(str(ROOT), include=["streaming*", "sources*", "sinks*"])
        if "__pycache__" not in name
    }
    assert set(setuptools["packages"]) == found | {"streaming.web"}
    assert setuptools["package-dir"] == {"streaming.web": "web"}
    shipped = setuptools["package-data"]["streaming.web"]
    for path in (ROOT / "web").iterdir():
        assert any(path.match(pattern) for pattern in shipped), f"{path.name} would not ship"


def test_bench_lists_every_benchmark_and_each_one_exists():
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "streaming.cli", "bench"], capture_output=True, text=True, cwd=ROOT
    )
    assert done.returncode == 2 and "latency" in done.stderr and "reference" in done.stderr
    from benchmarks.__main__ import NAMES

    for name in NAMES:
        assert (ROOT / "benchmarks" / f"{name.replace('-', '_')}.py").is_file(), name
