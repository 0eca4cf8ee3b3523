"""Real compute's charge rule (raytestbed/emu/executors/compute.py: ComputeCharge), without torch runs."""

import pytest

from raytestbed.emu.executors.compute import ComputeCharge


def test_charges_follow_the_profile_whatever_the_hosts_speed():
    for cpu in (0.001, 0.01, 0.3):  # a fast, a slow and a loaded host: CPU seconds of the same pass
        c = ComputeCharge({"fwd": 0.02}, {"fwd": [cpu] * 9})
        assert [c.charge("fwd", cpu) for _ in range(5)] == pytest.approx([0.02] * 5)


def test_a_one_off_spike_is_filtered_and_a_lasting_change_shows():
    c = ComputeCharge({"bwd": 0.04}, {"bwd": [0.01] * 9})
    assert c.charge("bwd", 0.05) == pytest.approx(0.04)  # a context switch: 5x one pass, not charged
    assert c.charge("bwd", 0.01) == pytest.approx(0.04)
    got = [c.charge("bwd", 0.012) for _ in range(4)]  # the stage got 20 % dearer for good
    assert got[1:] == pytest.approx([0.048] * 3)


def test_a_fixed_factor_charges_cpu_seconds_as_they_are():
    assert ComputeCharge({"fwd": 1.0}, factor=0.05).charge("fwd", 0.2) == pytest.approx(0.01)


def test_a_run_is_charged_its_profile_from_its_first_pass_on():
    """No samples from outside the run: the first passes (a cold first one included) are charged the profile."""
    c = ComputeCharge({"fwd": 0.02})
    got = [c.charge("fwd", cpu) for cpu in (0.03, 0.01, 0.01, 0.01, 0.01)]
    assert got == pytest.approx([0.02] * 5)


def test_a_runs_cold_first_pass_does_not_make_its_next_passes_look_fast():
    """The first pass (3x the others' CPU time) is charged the profile and kept out of the window: the
    steady passes after it are charged the profile, not 5 % less (the median of a short window
    that held the cold pass sat half a rank too high)."""
    steady = [0.010, 0.011, 0.009, 0.010, 0.011, 0.009]
    c = ComputeCharge({"bwd": 0.02})
    got = [c.charge("bwd", cpu) for cpu in [0.03] + steady]
    assert got[0] == 0.02 and c.samples["bwd"] == steady
    assert got[1:] == pytest.approx([0.02] * 6)
    kept = ComputeCharge({"bwd": 0.02}, cold=0)  # the cold pass in the window: the 3rd warm pass charged 0.95x
    assert [kept.charge("bwd", cpu) for cpu in [0.03] + steady][3] == pytest.approx(0.02 * 0.010 / 0.0105)


def test_a_real_worker_starts_with_no_cpu_samples_from_outside_its_run():
    """The charge window holds only the run's own passes (none measured alone before the run)."""
    from raytestbed.core.cluster import Cluster
    from raytestbed.core.placement import Placement
    from raytestbed.core.profile import default_profiles
    from raytestbed.execution.plan import plan_job
    from raytestbed.emu.executors.worker import StageWorker
    from raytestbed.traces.jobs import build_job

    prof = default_profiles()["mlp-tiny"]
    job = build_job(1, 0.0, prof, 2, "pipeline", 3)
    plan = plan_job(job, Placement(((0,), (1,))), Cluster.homogeneous(1, 2, 1e9, 1e10), iterations=3,
                    mode="real", profile=prof)
    for spec in plan.workers:
        w = StageWorker(spec, clock=None, pid=(0, "w", spec.rank))
        assert w.driver.compute.charges.factor is None and w.driver.compute.charges.samples == {}


def test_inbound_flows_hold_the_gpu_for_their_union_once():
    """Two inbound flows that shared the ingress port over the same interval are charged it once
    (eq. 5's sequential time at the full rate); gaps and later flows count; out-of-order spans too."""
    from raytestbed.execution.plan import InboundTime

    h = InboundTime()
    assert h.charge([(1.0, 3.0)]) == pytest.approx(2.0)
    assert h.charge([(1.5, 3.5)]) == pytest.approx(0.5)  # overlapped [1.5, 3]: charged already
    assert h.charge([(5.0, 6.0), (5.5, 7.0)]) == pytest.approx(2.0)  # one receive, two overlapping slices
    assert h.charge([(0.0, 8.0)]) == pytest.approx(8.0 - 2.5 - 2.0)  # an older, longer span: only the gaps
    assert h.charge([(9.0, 9.5)]) == pytest.approx(0.5)
    covered = InboundTime()
    covered.cover(10.0, 12.0)  # an all-reduce step held the GPU: inbound flows meanwhile are not charged again
    assert covered.charge([(11.0, 13.0)]) == pytest.approx(1.0)
    covered.cover(14.0, 14.0)  # an empty step covers nothing
    assert covered.charge([(13.5, 14.5)]) == pytest.approx(1.0)
    small = InboundTime(keep=1)
    small.charge([(0.0, 1.0)])
    small.charge([(2.0, 3.0)])
    assert small.charge([(0.0, 1.0)]) == pytest.approx(1.0)  # forgotten: charged in full, never less
