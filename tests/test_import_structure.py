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


def referenced(path: Path) -> set[str]:
    """Every name a file calls (``f(...)``, ``m.f(...)``) or imports."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Call):
            f = node.func
            names.add(f.id if isinstance(f, ast.Name) else getattr(f, "attr", ""))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {a.asname or a.name for a in node.names}
    return names


def test_the_worker_program_is_written_once():
    """The 1F1B order, the ring's steps, the PS push and pull (their sizes and coflows) and eq. 5's
    inbound charge are used in execution/ only (the program, its driver, its compute strategies);
    the simulator and the emulator drive the program and do not schedule a worker themselves."""
    parts = {"one_f_one_b", "ring_chunks", "rotated", "coflow_bytes", "split_sizes", "InboundTime",
             "stage_program", "ps_program"}
    users = {p.relative_to(PKG).as_posix() for p in PKG.rglob("*.py") if parts & referenced(p)}
    drivers = {"sim/pipeline_workers.py", "emu/executors/worker.py"}  # they pick the program to drive
    assert users - drivers <= {"execution/plan.py", "execution/worker_program.py", "execution/driver.py",
                               "execution/compute.py"}, sorted(users)
    for d in drivers:
        assert parts & referenced(PKG / d) <= {"stage_program", "ps_program"}, d
