"""A failing policy is named: an exception, a wrong return type or an invalid decision stops the run with one
line naming the policy, the event (kind, time, job) and the problem; exit status 2, nothing written;
``--debug`` keeps the traceback; the Python API raises :class:`PolicyFault` with the original chained."""

import sys
from pathlib import Path

import pytest

from raytestbed.cli import main
from raytestbed.core.events import JobArrived
from raytestbed.errors import PolicyFault

POLICIES = '''
from raytestbed import JobArrived, Placement, Policy, StartJob


class Raises(Policy):
    role = "placement"

    def on_event(self, event, view):
        if isinstance(event, JobArrived) and event.job.job_id == 2:
            return 1 / 0
        return []


class OneDecision(Policy):
    """Returns a StartJob instead of [StartJob]."""
    role = "placement"

    def on_event(self, event, view):
        if isinstance(event, JobArrived):
            job = event.job
            return StartJob(job.job_id, Placement.fill_in_order(job, [(0, view.free_gpus(0)[:job.gpus])]))
        return []


class SameGpus(Policy):
    """Starts every job on GPU 0 (and returns None for "no decision", which is allowed)."""
    role = "placement"

    def on_event(self, event, view):
        if isinstance(event, JobArrived):
            job = event.job
            return [StartJob(job.job_id, Placement(tuple(tuple(range(r)) for r in job.replicas())))]
        return None


class NoPs(Policy):
    """Starts a parameter-server job without PS servers."""
    role = "placement"

    def on_event(self, event, view):
        if isinstance(event, JobArrived):
            job = event.job
            return [StartJob(job.job_id, Placement.fill_in_order(job, [(0, view.free_gpus(0)[:job.gpus])]))]
        return None
'''


def _trial(tmp_path: Path, comm: str = "rar") -> Path:
    (tmp_path / "faulty.py").write_text(POLICIES)
    t = tmp_path / "t.yaml"
    t.write_text("cluster: laptop.yaml\n"
                 f"workload: {{kind: synthetic, jobs: 6, iterations: [20, 50], gpu_mix: {{1: 1}}, "
                 f"comm_mix: {{{comm}: 1}}}}\n")
    return t


def _fails(tmp_path, capsys, policy: str, comm: str = "rar", extra=()) -> str:
    out = tmp_path / "out"
    code = main(["run", str(_trial(tmp_path, comm)), "--policy", f"faulty:{policy}", "--out", str(out), "--quiet",
                 *extra])
    err = capsys.readouterr().err
    assert code == 2, err
    assert not out.exists() and not list(tmp_path.glob("out.*")), "nothing is written"
    return err


def test_exception_in_a_policy_is_one_line_naming_policy_event_and_problem(tmp_path, capsys):
    err = _fails(tmp_path, capsys, "Raises")
    assert err.count("\n") == 1 and err.startswith("raytestbed: error: "), err
    assert "policy 'faulty:Raises'" in err and "JobArrived at t = " in err and "(job 2)" in err
    assert "raised ZeroDivisionError: division by zero" in err


def test_debug_keeps_the_traceback(tmp_path, capsys):
    err = _fails(tmp_path, capsys, "Raises", extra=["--debug"])
    assert "Traceback" in err and "1 / 0" in err and "ZeroDivisionError" in err
    assert err.rstrip().splitlines()[-1].startswith("raytestbed: error: policy 'faulty:Raises'")


def test_one_decision_instead_of_a_list_is_named(tmp_path, capsys):
    err = _fails(tmp_path, capsys, "OneDecision")
    assert err.count("\n") == 1, err
    assert "policy 'faulty:OneDecision' failed on JobArrived at t = 0 s (job 0)" in err
    assert "returned a StartJob, not a list of decisions" in err


def test_invalid_decision_names_policy_and_event(tmp_path, capsys):
    err = _fails(tmp_path, capsys, "SameGpus")
    assert err.count("\n") == 1, err
    assert "policy 'faulty:SameGpus' failed on JobArrived" in err and "(job 1)" in err
    assert "StartJob: job 1: GPU 0 (server 0) is not free" in err


def test_missing_ps_servers_names_policy(tmp_path, capsys):
    err = _fails(tmp_path, capsys, "NoPs", comm="ps")
    assert "policy 'faulty:NoPs' failed on JobArrived at t = 0 s (job 0)" in err
    assert "needs 1 PS servers, placement gives 0" in err


def test_python_api_raises_policy_fault_with_the_original_chained(tmp_path, monkeypatch):
    import raytestbed as rtb

    t = _trial(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(PolicyFault, match=r"policy 'faulty:Raises' failed on JobArrived .*ZeroDivisionError") as ei:
        rtb.run(t, "faulty:Raises")
    assert isinstance(ei.value.__cause__, ZeroDivisionError)
    assert "1 / 0" in ei.value.detail
    sys.modules.pop("faulty", None)


def test_emulator_raises_the_same_fault_from_its_clock(tmp_path, monkeypatch):
    from conftest import rar_job, run_emulated_in_process, small_cluster

    monkeypatch.syspath_prepend(str(tmp_path))
    _trial(tmp_path)
    import faulty

    jobs = [rar_job(i, arrival=float(i), workers=1, iterations=5) for i in range(4)]
    with pytest.raises(PolicyFault, match=r"policy 'raises' failed on JobArrived at t = 2 s \(job 2\): raised "
                                          r"ZeroDivisionError") as ei:
        pol = faulty.Raises()
        pol.name = "raises"
        run_emulated_in_process(small_cluster(1, 4), jobs, [pol])
    assert "1 / 0" in ei.value.detail
    # the message survives pickling (the clock actor's error reaches the driver through Ray)
    import pickle

    again = pickle.loads(pickle.dumps(ei.value))
    assert str(again) == str(ei.value) and again.detail == ei.value.detail
    sys.modules.pop("faulty", None)
