"""Plug-ins without forking: policies and workload kinds from a user's own module (import path) or
from an installed distribution (entry points), run by the CLI and the Python API; broken plug-ins
give one line and exit status 2; ``raytestbed policies`` / ``workloads`` list them with their origin.

Every plug-in module here is written into a temporary folder outside the package, under a name
unique to the test (no import cache is shared between tests).
"""

import json
import sys
import textwrap
import uuid
from pathlib import Path

import pandas as pd
import pytest

import raytestbed as rtb
from raytestbed.cli import main

POLICY_SRC = '''
from raytestbed import FreePool, JobArrived, Placement, Policy, SetFlowWeights, StartJob


class BiggestFirst(Policy):
    """Largest job (GPUs) first, first fit; a test plug-in."""

    role = "placement"

    def __init__(self, seed=0, order="desc"):
        super().__init__(seed)
        self.order = order
        self.calls = 0

    def on_event(self, event, view):
        self.calls += 1
        out, pool = [], FreePool(view)
        sign = -1 if self.order == "desc" else 1
        for job in sorted(view.pending.values(), key=lambda j: (sign * j.gpus, j.arrival_s, j.job_id)):
            for m in range(view.cluster.num_servers):
                if pool.free_count[m] >= job.gpus:
                    out.append(StartJob(job.job_id, Placement.fill_in_order(job, [(m, pool.take(m, job.gpus))])))
                    break
        return out


class SmallFlowsFirst(Policy):
    """Network plug-in: a job's flows weigh 1 / its GPU count; a test plug-in."""

    role = "network"

    def on_event(self, event, view):
        if isinstance(event, JobArrived):
            return []
        return [SetFlowWeights({jid: 1.0 / rj.job.gpus for jid, rj in view.running.items()})] if view.running else []


class Liar(Policy):
    """Starts a job that does not exist."""

    def on_event(self, event, view):
        return [StartJob(999, Placement(((0,),)))] if isinstance(event, JobArrived) else []


class NotAPolicy:
    role = "placement"


class Abstract(Policy):
    pass
'''

WORKLOAD_SRC = '''
import json

from raytestbed import CommPattern, build_job


def load_lines(params, ctx):
    """Jobs from a JSON-lines file: one {"id", "t", "gpus", "model", "iters"} object per line."""
    jobs = []
    for line in ctx.resolve(params["path"]).read_text().splitlines():
        r = json.loads(line)
        jobs.append(build_job(r["id"], r["t"], ctx.profile(r["model"], "jobs"), r["gpus"], CommPattern.RAR,
                              r["iters"]))
    return jobs


def wrong_signature(params):
    return []


def returns_dicts(params, ctx):
    return [{"job_id": 0}]
'''

JOBS_JSONL = "\n".join(json.dumps(r) for r in [
    {"id": 0, "t": 0.0, "gpus": 1, "model": "resnet-small", "iters": 20},
    {"id": 1, "t": 0.0, "gpus": 2, "model": "resnet-small", "iters": 20},
    {"id": 2, "t": 0.1, "gpus": 4, "model": "resnet-small", "iters": 10},
])


@pytest.fixture
def plugdir(tmp_path, monkeypatch):
    """A folder outside the package with a policy module and a workload module (unique names), put on
    sys.path; yields (folder, policy module name, workload module name)."""
    tag = uuid.uuid4().hex[:8]
    pol, wl = f"userpol_{tag}", f"usertrace_{tag}"
    d = tmp_path / "plugins"
    d.mkdir()
    (d / f"{pol}.py").write_text(POLICY_SRC)
    (d / f"{wl}.py").write_text(WORKLOAD_SRC)
    (tmp_path / "jobs.jsonl").write_text(JOBS_JSONL)
    monkeypatch.setattr(sys, "path", [str(d), *sys.path])
    yield d, pol, wl


def _trial(tmp_path: Path, workload: str, extra: str = "", gpus: int = 4, nic_gbps: float = 10) -> Path:
    p = tmp_path / "t.yaml"
    p.write_text(textwrap.dedent(f"""
        name: plug
        seed: 1
        cluster: {{name: tiny, nic_gbps: {nic_gbps}, intra_gbytes_per_s: 1, servers: [{{count: 2, gpus: {gpus}}}]}}
        workload: {workload}
        timing: {{mode: flow, iterations_per_coflow: 5}}
        """) + extra)
    return p


CSV = "job_id,arrival_s,gpus,iterations,model,comm\n0,0,1,20,resnet-small,rar\n1,0,2,20,resnet-small,rar\n" \
      "2,0.1,4,10,resnet-small,rar\n"


def _csv_trial(tmp_path: Path, extra: str = "") -> Path:
    (tmp_path / "jobs.csv").write_text(CSV)
    return _trial(tmp_path, "{kind: csv, path: jobs.csv}", extra)


def _one_line_error(capsys, code: int) -> str:
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert len(err.splitlines()) == 1, err
    return err


# ----------------------------------------------------------------------------- import paths, simulator
def test_policy_by_import_path_runs_in_the_simulator_alone_and_in_a_pair(tmp_path, plugdir, capsys):
    _, pol, _ = plugdir
    trial = _csv_trial(tmp_path, f"policy_params: {{'{pol}:BiggestFirst': {{order: asc}}}}\n")
    name = f"{pol}:BiggestFirst"
    out = tmp_path / "cmp"
    assert main(["compare", str(trial), "--policies", f"fifo,{name},{name}+fair", "--out", str(out),
                 "--quiet"]) == 0
    table = pd.read_csv(out / "comparison.csv")
    assert table["policy"].tolist() == ["fifo", name, f"{name}+fair"]
    assert (table["finished"] == 3).all()
    folder = name.replace(":", ".")  # the policy's sub-folder: no ':' in a folder name
    s = json.loads((out / folder / "summary.json").read_text())
    assert s["policy"] == name and s["policy_params"] == {"order": "asc"}
    decisions = [json.loads(x) for x in (out / folder / "decisions.jsonl").read_text().splitlines()]
    assert decisions and {d["policy"] for d in decisions} == {name}
    assert f"({folder}/report.md)" in (out / "report.md").read_text()


def test_import_path_module_beside_the_trial_file_is_found(tmp_path, monkeypatch):
    tag = uuid.uuid4().hex[:8]
    (tmp_path / f"besides_{tag}.py").write_text(POLICY_SRC)
    monkeypatch.setattr(sys, "path", list(sys.path))  # whatever the loader appends is undone
    monkeypatch.chdir(Path(__file__).parent)  # not the trial's folder
    trial = _csv_trial(tmp_path)
    out = tmp_path / "r"
    assert main(["run", str(trial), "--policy", f"besides_{tag}:BiggestFirst", "--out", str(out), "--quiet"]) == 0
    assert json.loads((out / "summary.json").read_text())["finished"] == 3


def test_the_api_takes_the_class_itself_and_the_pair_as_a_tuple(tmp_path, plugdir):
    _, pol, _ = plugdir
    mod = __import__(pol)
    trial = rtb.load_trial(_csv_trial(tmp_path))
    res = rtb.run(trial, (mod.BiggestFirst, "fair"))
    assert res.folder is None and res.summary["policy"] == f"{pol}:BiggestFirst"
    assert res.summary["network_policy"] == "fair" and (res.jobs["status"] == "finished").all()
    assert res.summary["policy_params"] == {"order": "desc"}


def test_workload_kind_by_import_path(tmp_path, plugdir, capsys):
    _, _, wl = plugdir
    trial = _trial(tmp_path, f"{{kind: '{wl}:load_lines', path: jobs.jsonl}}")
    out = tmp_path / "r"
    assert main(["run", str(trial), "--out", str(out), "--quiet"]) == 0
    jobs = pd.read_csv(out / "jobs.csv")
    assert jobs["gpus"].tolist() == [1, 2, 4] and (jobs["status"] == "finished").all()
    assert main(["workloads", f"{wl}:load_lines"]) == 0
    listing = capsys.readouterr().out
    assert f"{wl}:load_lines" in listing and "import path" in listing and "csv" in listing


# ----------------------------------------------------------------------------- broken plug-ins
def test_a_decision_the_backend_refuses_is_one_line_naming_the_plugin(tmp_path, plugdir, capsys):
    _, pol, _ = plugdir
    out = tmp_path / "out"
    err = _one_line_error(capsys, main(["run", str(_csv_trial(tmp_path)), "--policy", f"{pol}:Liar", "--out",
                                        str(out), "--quiet"]))
    assert f"policy '{pol}:Liar' failed on JobArrived at t = 0 s (job 0): StartJob for job 999, which is not pending" in err
    assert not out.exists()


@pytest.mark.parametrize("spec, reason", [
    ("nosuchmodule_{tag}:Policy", "cannot import nosuchmodule_{tag}: ModuleNotFoundError"),
    ("{pol}:Missing", "has no attribute 'Missing'"),
    ("{pol}:NotAPolicy", "does not subclass raytestbed.Policy"),
    ("{pol}:Abstract", "is abstract (it does not implement on_event)"),
    ("{broken}:Anything", "cannot import {broken}: ZeroDivisionError: division by zero"),
    ("{pol}", "unknown placement policy"),
])
def test_broken_policy_plugin_is_one_line_exit_2(tmp_path, plugdir, capsys, spec, reason):
    d, pol, _ = plugdir
    tag = uuid.uuid4().hex[:8]
    broken = f"broken_{tag}"
    (d / f"{broken}.py").write_text("x = 1 / 0\n")
    spec, reason = (s.format(tag=tag, pol=pol, broken=broken) for s in (spec, reason))
    trial = _csv_trial(tmp_path)
    out = tmp_path / "out"
    err = _one_line_error(capsys, main(["run", str(trial), "--policy", spec, "--out", str(out), "--quiet"]))
    assert spec in err and reason in err, err
    assert not out.exists()
    err = _one_line_error(capsys, main(["compare", str(trial), "--policies", f"fifo,{spec}", "--out", str(out),
                                        "--quiet"]))
    assert spec in err and reason in err
    if ":" in spec:
        err = _one_line_error(capsys, main(["policies", spec]))
        assert spec in err and reason in err


@pytest.mark.parametrize("fn, reason", [
    ("wrong_signature", "cannot be called as fn(params: dict, ctx: WorkloadContext)"),
    ("returns_dicts", "item 0 is a dict, not a raytestbed Job"),
    ("JOBS_MISSING", "has no attribute 'JOBS_MISSING'"),
])
def test_broken_workload_plugin_is_one_line_exit_2(tmp_path, plugdir, capsys, fn, reason):
    _, _, wl = plugdir
    trial = _trial(tmp_path, f"{{kind: '{wl}:{fn}', path: jobs.jsonl}}")
    out = tmp_path / "out"
    err = _one_line_error(capsys, main(["run", str(trial), "--out", str(out), "--quiet"]))
    assert f"{wl}:{fn}" in err and reason in err, err
    assert not out.exists()


# ----------------------------------------------------------------------------- entry points
def _install_dist(site: Path, dist: str, entry_points: str) -> None:
    """A throw-away installed distribution: a .dist-info folder on sys.path (what pip writes)."""
    info = site / f"{dist}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(entry_points)


def test_entry_point_plugins_run_and_are_listed(tmp_path, plugdir, capsys, monkeypatch):
    d, pol, wl = plugdir
    tag = uuid.uuid4().hex[:8]
    _install_dist(d, f"sched_{tag}", f"[raytestbed.policies]\nbiggest-{tag} = {pol}:BiggestFirst\n"
                                     f"broken-{tag} = {pol}:NotAPolicy\n"
                                     f"fifo = {pol}:BiggestFirst\n"
                                     f"[raytestbed.workloads]\nlines-{tag} = {wl}:load_lines\n")
    trial = _trial(tmp_path, f"{{kind: lines-{tag}, path: jobs.jsonl}}")
    out = tmp_path / "r"
    assert main(["run", str(trial), "--policy", f"biggest-{tag}+fair", "--out", str(out), "--quiet"]) == 0
    s = json.loads((out / "summary.json").read_text())
    assert s["policy"] == f"biggest-{tag}" and s["finished"] == 3 and s["policy_params"] == {"order": "desc"}
    capsys.readouterr()

    # the broken entry point is named when listed or used, and only then
    err = _one_line_error(capsys, main(["policies"]))
    assert f"broken-{tag}" in err and f"entry point of sched_{tag}" in err and "does not subclass" in err
    err = _one_line_error(capsys, main(["run", str(trial), "--policy", f"broken-{tag}", "--out",
                                        str(tmp_path / "x"), "--quiet"]))
    assert f"broken-{tag}" in err and "does not subclass raytestbed.Policy" in err
    assert main(["workloads"]) == 0
    assert f"lines-{tag}" in capsys.readouterr().out

    # remove the broken one: the listing shows plug-ins beside built-ins, with their origin
    (d / f"sched_{tag}-0.1.dist-info" / "entry_points.txt").write_text(
        f"[raytestbed.policies]\nbiggest-{tag} = {pol}:BiggestFirst\nfifo = {pol}:BiggestFirst\n")
    assert main(["policies", f"{pol}:BiggestFirst"]) == 0
    lines = capsys.readouterr().out.splitlines()
    row = {ln.split()[0]: ln for ln in lines if ln.startswith("  ")}
    assert "built-in" in row["fifo"] and "built-in" in row["asrpt"]
    assert f"entry point (sched_{tag})" in row[f"biggest-{tag}"]
    assert "Largest job (GPUs) first" in row[f"biggest-{tag}"]
    assert "import path" in row[f"{pol}:BiggestFirst"]
    assert any("fifo" in ln and "ignored" in ln for ln in lines)  # the built-in wins over a same-named entry
    df = rtb.policies(f"{pol}:BiggestFirst")
    assert set(df.loc[df["name"] == f"biggest-{tag}", "origin"]) == {f"entry point (sched_{tag})"}


# ----------------------------------------------------------------------------- on the emulator
@pytest.mark.slow  # a long end-to-end run: `make test-slow`
def test_plugins_run_on_the_emulator(tmp_path, plugdir, capsys):
    """A placement policy from an entry point, a network policy and a workload kind by import path, all
    from a folder the Ray workers cannot import from: the policies travel by value to the scheduler actor."""
    from raytestbed.emu.backend import emulator_missing

    if emulator_missing():
        pytest.skip(f"emulator: {emulator_missing()}")
    d, pol, wl = plugdir
    tag = uuid.uuid4().hex[:8]
    _install_dist(d, f"sched_{tag}", f"[raytestbed.policies]\nbiggest-{tag} = {pol}:BiggestFirst\n")
    trial = _trial(tmp_path, f"{{kind: '{wl}:load_lines', path: jobs.jsonl}}",
                   "emu: {compute: replay, progress_s: 0.5}\n", nic_gbps=0.5)
    out = tmp_path / "emu"
    pair = f"biggest-{tag}+{pol}:SmallFlowsFirst"
    assert main(["run", str(trial), "--backend", "emu", "--policy", pair, "--out", str(out), "--quiet"]) == 0
    s = json.loads((out / "summary.json").read_text())
    assert (s["backend"], s["policy"], s["network_policy"]) == ("emu", f"biggest-{tag}", f"{pol}:SmallFlowsFirst")
    assert s["finished"] == 3 and s["policy_params"] == {"order": "desc"}
    jobs = pd.read_csv(out / "jobs.csv")
    assert (jobs["measured_iterations"] >= jobs["iterations"]).all()  # really run by the executors
    decided = {json.loads(x)["policy"] for x in (out / "decisions.jsonl").read_text().splitlines()}
    assert decided == {f"biggest-{tag}", f"{pol}:SmallFlowsFirst"}
