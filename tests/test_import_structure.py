"""The package's layering, read from every module's imports (top-level and inside functions):
``core/`` imports nothing above it, ``execution/`` neither backend, the backends (``sim/``,
``emu/``) do not import each other, and no module imports itself through others (no circles)."""

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


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """Module -> the package's modules it imports, at module level or inside functions alike
    (``from raytestbed.a import b`` names the module ``raytestbed.a.b`` where that is one)."""
    files = {module_name(p): p for p in PKG.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for mod, path in files.items():
        out = graph.setdefault(mod, set())
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                out |= {a.name for a in node.names if a.name in files}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for a in node.names:
                    sub = f"{node.module}.{a.name}"
                    target = sub if sub in files else node.module
                    if target in files and target != mod:
                        out.add(target)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_circles_are_found():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_no_import_circles_in_the_package():
    """No module reaches itself through the package's imports (top-level or inside functions): each
    layer can be read, tested and loaded without the ones that use it."""
    found = circles(import_graph())
    assert not found, found


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
