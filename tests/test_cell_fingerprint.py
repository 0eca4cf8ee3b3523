"""A sweep cell's fingerprint and the trial settings added after cells were finished (config.DEFAULTS_AS_BEFORE)."""

from raytestbed.experiments.spec import trial_with

TRIAL = "workloads/trials/parity_ps.yaml"


def test_cells_finished_before_the_setting_existed_keep_their_fingerprint():
    """compute_noise at its default runs a trial as before the setting existed, so a sweep cell's fingerprint
    leaves it out there (finished cells resume) and counts it once it is set."""
    from dataclasses import replace

    from raytestbed.config import DEFAULTS_AS_BEFORE
    from raytestbed.experiments.spec import Axis, PolicySpec, Sweep

    cell = Sweep("s", [trial_with(TRIAL)], [PolicySpec("fifo", "fifo")], [1], "sim",
                 [Axis.field("cluster.nic_gbps", [1.0])], ["total_jct_s"]).cells()[0]
    timing = cell.data["timing"]
    assert {k: timing[k] for k in ("compute_noise", "compute_noise_seed")} == {
        p.split(".")[1]: v for p, v in DEFAULTS_AS_BEFORE.items()}
    older = {k: v for k, v in timing.items() if not k.startswith("compute_noise")}  # as before the setting
    before = replace(cell, data={**cell.data, "timing": older})
    assert cell.fingerprint == before.fingerprint
    noisy = replace(cell, data={**cell.data, "timing": {**timing, "compute_noise": 0.02}})
    assert noisy.fingerprint != cell.fingerprint


#: the trial settings every finished sweep cell's fingerprint was made with (top level, timing, emu, cluster)
FINGERPRINTED = {
    "": {"backend", "cluster", "emu", "faults", "name", "network_policy", "policy", "policy_params", "profiles",
         "seed", "timing", "workload"},
    "timing": {"admission_epoch_s", "fast_forward", "iterations_per_coflow", "mode", "model", "model_params",
               "restore_s", "schedule", "throughputs", "until_s"},
    "emu": {"address", "compute", "compute_device", "compute_factor", "fast_forward", "gpus_per_actor", "nic_share",
            "pace", "progress_s", "replay_payload_bytes", "start_timeout_s", "workers"},
    "cluster": {"description", "gpu_speed", "intra_gbytes_per_s", "name", "nic_gbps", "racks", "servers",
                "servers_per_rack"},
}


def test_a_new_trial_setting_decides_about_finished_cells():
    """A new setting enters every cell's resolved trial, so every finished sweep cell would run again; its
    author lists it in config.DEFAULTS_AS_BEFORE (its default runs trials as before) or here (it does not)."""
    from raytestbed.config import DEFAULTS_AS_BEFORE

    data = trial_with(TRIAL).resolved()
    quiet = {tuple(p.split(".")) for p in DEFAULTS_AS_BEFORE}
    for section, known in FINGERPRINTED.items():
        keys = set(data if not section else data[section])
        new = {k for k in keys - known if (section, k) not in quiet}
        assert not new, (f"new trial setting(s) {sorted(new)} in {section or 'the trial'}: add to "
                         "config.DEFAULTS_AS_BEFORE if the default runs every trial as before, else to FINGERPRINTED")
