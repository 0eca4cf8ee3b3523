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
