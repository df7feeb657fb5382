"""The code's shape, kept: small modules, classes and functions; the client without the
server's engine; a map (docs/ARCHITECTURE.md) that names every package."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("streaming", "sources", "sinks")
MAX_MODULE_LINES, MAX_CLASS_LINES, MAX_FUNCTION_LINES = 450, 300, 80


def _modules() -> list[Path]:
    return sorted(p for package in PACKAGES for p in (ROOT / package).rglob("*.py"))


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_modules_classes_and_functions_stay_small(path: Path) -> None:
    text = path.read_text()
    too_big = []
    if (lines := len(text.splitlines())) > MAX_MODULE_LINES:
        too_big.append(f"the module has {lines} lines (at most {MAX_MODULE_LINES})")
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            assert node.end_lineno is not None
            lines = node.end_lineno - node.lineno + 1
            limit = MAX_CLASS_LINES if isinstance(node, ast.ClassDef) else MAX_FUNCTION_LINES
            if lines > limit:
                too_big.append(f"{node.name} has {lines} lines (at most {limit})")
    assert not too_big, f"{path.relative_to(ROOT)}: split it: {'; '.join(too_big)}"


def test_the_client_command_loads_no_block_of_the_server_s_engine() -> None:
    probe = (
        "import sys, streaming.client.command\n"
        "print('\\n'.join(m for m in sys.modules if m.startswith('streaming.workflows')))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    assert loaded == []


def test_the_map_names_every_package() -> None:
    architecture = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    packages = sorted(
        {
            str(module.parent.relative_to(ROOT))
            for package in PACKAGES
            for module in (ROOT / package).rglob("*.py")
            if "migrations" not in module.parts  # Alembic's, named with the event store
        }
    )
    missing = [p for p in packages if f"{p}/" not in architecture]
    assert not missing, f"docs/ARCHITECTURE.md does not name: {missing}"


def _imports(path: Path) -> set[str]:
    """Every module ``path`` imports, relative imports made absolute."""
    package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1]
            module = node.module or ""
            found.add(".".join([*base, module]).strip(".") if node.level else module)
    return found


@pytest.mark.parametrize(
    ("where", "never"),
    [
        ("sources", ("streaming",)),
        # Sinks are the lower layer (egress, masking, writing video): sources connect out
        # through sinks.pinning, and nothing in sinks/ reads sources/.
        ("sinks", ("streaming", "sources")),
        ("streaming/client", ("streaming.peer", "streaming.server", "streaming.workflows",
                              "streaming.pipelines")),
        ("streaming/peer", ("streaming.pipelines",)),
    ],
)  # fmt: skip
def test_dependencies_point_one_way(where: str, never: tuple[str, ...]) -> None:
    crossing = {
        f"{path.relative_to(ROOT)} imports {module}"
        for path in (ROOT / where).rglob("*.py")
        for module in _imports(path)
        if module.startswith(never)
    }
    assert not crossing, sorted(crossing)
