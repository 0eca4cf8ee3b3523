"""The package's layering, read from every module's imports (top-level and inside functions):
``core/`` imports nothing above it, ``execution/`` neither backend, and the backends (``sim/``,
``emu/``) do not import each other."""

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "raytestbed"


def imported(path: Path) -> set[str]:
    """Every ``raytestbed`` module a file imports (absolute names)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return {n for n in names if n == "raytestbed" or n.startswith("raytestbed.")}


@pytest.mark.parametrize("folder,allowed", [
    # errors.py and resources.py (the resolver of shipped files) are leaves: they import only errors
    ("core", ("raytestbed.core", "raytestbed.errors", "raytestbed.resources")),
    ("execution", ("raytestbed.core", "raytestbed.errors", "raytestbed.resources", "raytestbed.models",
                   "raytestbed.execution")),
])
def test_lower_layers_import_nothing_above_them(folder, allowed):
    bad = {f"{p.relative_to(PKG)} imports {m}" for p in (PKG / folder).rglob("*.py") for m in imported(p)
           if not m.startswith(allowed)}
    assert not bad, sorted(bad)


def test_the_leaves_import_only_errors():
    for leaf in ("errors.py", "resources.py"):
        assert imported(PKG / leaf) <= {"raytestbed.errors"}, leaf


@pytest.mark.parametrize("folder,other", [("sim", "emu"), ("emu", "sim")])
def test_the_backends_do_not_import_each_other(folder, other):
    bad = {f"{p.relative_to(PKG)} imports {m}" for p in (PKG / folder).rglob("*.py") for m in imported(p)
           if m.startswith(f"raytestbed.{other}")}
    assert not bad, sorted(bad)
