"""docs/tutorial.md is executed, so it cannot rot.

The Markdown's fenced code blocks run in order in an empty temporary folder:

* ```` ```LANG file=NAME ```` writes the block to ``NAME`` (the user's own files: policies, trial);
* ```` ```python ```` runs the block (one namespace for the whole tutorial, stdout captured);
* ```` ```text output ```` must equal what the block before it printed (simulator numbers are
  deterministic; emulated ones are shown in plain ```` ```text ```` blocks, not compared);
* ```` ```console ```` runs every ``$ raytestbed ...`` line through the CLI (exit status 0);
* ```` ```toml ```` must parse, and each entry point in it must load (``file=pyproject.toml``: written
  too; ``test_tutorial_package_installs`` builds and installs it as section 8 says);
* other blocks are illustrations and are skipped.

``python tests/test_tutorial.py DIR`` runs the tutorial in ``DIR`` and keeps what it wrote (to
refresh the pictures in ``docs/tutorial_files/``).
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

DOC = Path(__file__).resolve().parents[1] / "docs" / "tutorial.md"
FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```\s*$", re.S | re.M)


def blocks(text: str) -> list[tuple[str, dict[str, str], str]]:
    """(language, {option: value}, body) of every fenced block; options are ``key=value`` or bare words."""
    out = []
    for m in FENCE.finditer(text):
        lang, *opts = m.group(1).split() or [""]
        options = dict(o.split("=", 1) if "=" in o else (o, "") for o in opts)
        out.append((lang, options, m.group(2)))
    return out


def run_tutorial(folder: Path, text: str, check: bool = True) -> list[str]:
    """Run the tutorial's blocks in ``folder``; returns a log line per block (AssertionError on a mismatch;
    ``check=False``: log what the code printed instead)."""
    from raytestbed.cli import main

    log: list[str] = []
    namespace: dict = {"__name__": "__tutorial__"}
    printed: str | None = None
    old_cwd = os.getcwd()
    os.chdir(folder)
    sys.path.insert(0, str(folder))
    try:
        for i, (lang, opts, body) in enumerate(blocks(text)):
            where = f"{DOC.name} block {i + 1} ({lang} {' '.join(opts)})".strip()
            if "file" in opts:
                Path(opts["file"]).parent.mkdir(parents=True, exist_ok=True)
                Path(opts["file"]).write_text(body, encoding="utf-8")
                log.append(f"{where}: wrote {opts['file']}")
                if lang != "toml":  # a pyproject.toml is checked below as well
                    continue
            if lang == "python":
                buf = io.StringIO()
                t0 = time.perf_counter()
                with contextlib.redirect_stdout(buf):
                    exec(compile(body, where, "exec"), namespace)  # noqa: S102 - the tutorial is ours
                printed = buf.getvalue()
                log.append(f"{where}: ran ({time.perf_counter() - t0:.1f} s)" + ("" if check else "\n" + printed))
            elif lang == "text" and "output" in opts:
                assert printed is not None, f"{where}: no python block before it"
                shown = [ln.rstrip() for ln in body.rstrip().splitlines()]
                got = [ln.rstrip() for ln in printed.rstrip().splitlines()]
                if check:
                    assert got == shown, f"{where}: the code prints\n" + "\n".join(got)
                    log.append(f"{where}: output matches")
                else:
                    log.append(f"{where}: {'same' if got == shown else 'DIFFERENT'}; the code prints:\n"
                               + "\n".join(got))
            elif lang == "console":
                for line in body.splitlines():
                    if line.startswith("$ raytestbed "):
                        with contextlib.redirect_stdout(io.StringIO()):
                            code = main(shlex.split(line[len("$ raytestbed "):]))
                        assert code == 0, f"{where}: {line!r} exited with {code}"
                        log.append(f"{where}: {line[2:]}")
            elif lang == "toml":
                from raytestbed.plugins import load_attribute

                try:
                    import tomllib
                except ImportError:  # Python 3.10
                    continue
                data = tomllib.loads(body)
                eps = data["project"]["entry-points"]
                for group in eps.values():
                    for value in group.values():
                        load_attribute(value, "entry point")
                log.append(f"{where}: entry points load")
    finally:
        os.chdir(old_cwd)
        sys.path.remove(str(folder))
        for name, mod in list(sys.modules.items()):  # the tutorial's own modules
            if str(getattr(mod, "__file__", "") or "").startswith(str(folder)):
                del sys.modules[name]
    return log


# the whole tutorial (simulator, sweeps, an emulated comparison with its Ray start): beside four CPU-bound
# processes on 2 cores it needs more than the default 300 s
@pytest.mark.timeout(900)
def test_tutorial_runs(tmp_path, monkeypatch):
    pytest.importorskip("ray")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    log = run_tutorial(tmp_path, DOC.read_text(encoding="utf-8"))
    assert sum("output matches" in x for x in log) >= 8  # every table, as the tutorial shows it
    emu = pd.read_csv(tmp_path / "results" / "emu" / "comparison.csv")  # the emulated comparison really ran
    assert (emu["backend"] == "emu").all() and (emu["finished"] == emu["jobs"]).all()
    for png in ("results/sim/comparison.png", "results/seeds.png", "results/network_seeds.png"):
        assert (tmp_path / png).stat().st_size > 1000, png


def test_tutorial_package_installs(tmp_path):
    """Section 8 as written: the tutorial's files and its pyproject.toml build a wheel (no
    "Multiple top-level modules discovered in a flat-layout"), which installs into a fresh venv where
    ``raytestbed policies`` and ``raytestbed workloads`` list the entry points with the distribution."""
    import subprocess

    from conftest import build_wheel, fresh_venv

    folder = tmp_path / "tutorial"
    folder.mkdir()
    written = []
    for _lang, opts, body in blocks(DOC.read_text(encoding="utf-8")):
        if "file" in opts:
            (folder / opts["file"]).write_text(body, encoding="utf-8")
            written.append(opts["file"])
    assert "pyproject.toml" in written and len([f for f in written if f.endswith(".py")]) >= 2
    (folder / "results").mkdir()  # as the tutorial leaves it
    py = fresh_venv(tmp_path / "venv", [build_wheel(folder, tmp_path / "dist")])
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1])  # this raytestbed; the policies from the wheel
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    def listing(what: str) -> str:
        r = subprocess.run([str(py), "-m", "raytestbed.cli", what], cwd=elsewhere, env=env, capture_output=True,
                           text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        return r.stdout

    pols = {ln.split()[0]: ln for ln in listing("policies").splitlines() if ln.strip()}
    assert "my-scheduler" in pols["smallest-first"] and "my-scheduler" in pols["fewest-done-first"]
    assert "my-scheduler" in next(ln for ln in listing("workloads").splitlines() if ln.split()[:1] == ["jsonl"])


if __name__ == "__main__":
    os.environ.setdefault("MPLBACKEND", "Agg")
    target = Path(sys.argv[1]).resolve()
    target.mkdir(parents=True, exist_ok=True)
    for line in run_tutorial(target, DOC.read_text(encoding="utf-8"), check=False):
        print(line)
