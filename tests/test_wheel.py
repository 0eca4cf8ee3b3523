"""The built wheel works outside the source tree: installed into a fresh virtual environment, run from
an unrelated folder, ``raytestbed run`` passes an example trial on both backends with the shipped
files (trials, clusters, profiles, model files, trace slices) found as package data.

The fresh environment reuses the running interpreter's installed dependencies (a ``.pth`` file naming
its site-packages folders), so nothing is downloaded; the wheel itself is installed with ``--no-deps``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import build_wheel, fresh_venv

REPO = Path(__file__).resolve().parents[1]
_ANYWHERE = shutil.ignore_patterns("__pycache__", "*.egg-info", ".pytest_cache", ".hypothesis")


def _build_leftovers(folder: str, names: list[str]) -> set[str]:
    """What the copy of the source tree leaves out: caches anywhere, and the top level's outputs."""
    top = {".git", ".venv", "build", "dist", "results"} if Path(folder) == REPO else set()
    return set(_ANYWHERE(folder, names)) | (top & set(names))


def _site_packages(python: Path) -> Path:
    out = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         check=True, capture_output=True, text=True).stdout.strip()
    return Path(out)


def build_and_install(tmp: Path) -> Path:
    """Build the wheel from a copy of the source tree, install it into a fresh venv; the venv's python."""
    src = tmp / "src"
    shutil.copytree(REPO, src, ignore=_build_leftovers)
    return fresh_venv(tmp / "venv", [build_wheel(src, tmp / "dist")])


@pytest.mark.slow
def test_the_wheel_runs_an_example_trial_from_any_folder_on_both_backends(tmp_path):
    py = build_and_install(tmp_path)
    work = tmp_path / "elsewhere"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "RAY_ADDRESS")}
    env.update(RAYTESTBED_DATA_DIR=str(tmp_path / "no-data"), MPLBACKEND="Agg")  # the example trials need no data set

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(py), "-m", "raytestbed.cli", *args], cwd=work, env=env, capture_output=True,
                              text=True, timeout=600)

    r = subprocess.run([str(py), "-c", "import raytestbed, raytestbed.resources as r; "
                        "print(raytestbed.__file__); print(r.package_root())"], cwd=work, env=env, capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr
    where = r.stdout.split()
    site_dir = _site_packages(py)
    assert all(Path(w).is_relative_to(site_dir) for w in where), where  # the installed copy, not the checkout
    shipped = {p.relative_to(REPO) for top in ("workloads", "cluster_configs") for p in (REPO / top).rglob("*")
               if p.is_file() and "__pycache__" not in p.parts}
    missing = {p for p in shipped if not (Path(where[1]) / p).is_file()}
    assert len(shipped) > 40 and not missing, f"not in the wheel: {sorted(map(str, missing))}"

    for backend, trial, extra in (("sim", "workloads/trials/demo.yaml", ()),
                                  ("emu", "parity_rar", ("--policy", "fifo"))):
        r = run("run", trial, "--backend", backend, "--out", backend, "--quiet", *extra)
        assert r.returncode == 0, f"{backend}: {r.stderr[-3000:]}"
        summary = json.loads((work / backend / "summary.json").read_text())
        assert summary["backend"].startswith(backend) and summary["jobs"] > 0
        assert summary.get("finished", summary["jobs"]) == summary["jobs"]
    r = run("data", "list")
    assert r.returncode == 0 and "philly-jobs-rfold" in r.stdout
    r = run("run", "sjfbco_paper", "--backend", "sim", "--out", "x")  # a trial that needs a data set
    assert r.returncode == 2 and "raytestbed data fetch philly-jobs-rfold" in r.stderr
    assert not (work / "x").exists()
