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


def _cell(trial_path: str):
    from dataclasses import replace

    from raytestbed.experiments.spec import PolicySpec, Sweep

    cell = Sweep("s", [trial_with(TRIAL)], [PolicySpec("fifo", "fifo")], [1], "sim", [], ["total_jct_s"]).cells()[0]
    return replace(cell, path=trial_path)


def test_a_shipped_trial_fingerprints_the_same_from_any_copy_of_the_package(tmp_path, monkeypatch):
    """Cells of a trial shipped with the package resume in another checkout (or an installed wheel): the
    fingerprint counts the trial's path inside the package, not where the package lies."""
    from raytestbed.experiments import spec
    from raytestbed.resources import package_root

    here = _cell(str(package_root() / TRIAL)).fingerprint
    other_root = tmp_path / "elsewhere"
    monkeypatch.setattr(spec, "package_root", lambda: other_root)
    there = _cell(str(other_root / TRIAL))
    assert spec.portable_path(there.path) == f"package:{TRIAL}"
    assert there.fingerprint == here
    # a trial file outside the package counts by its absolute path: two folders are two trials
    a, b = _cell(str(tmp_path / "a" / "t.yaml")), _cell(str(tmp_path / "b" / "t.yaml"))
    assert a.fingerprint != b.fingerprint and a.fingerprint != here


def test_a_cell_finished_with_the_absolute_path_fingerprint_still_resumes(tmp_path):
    """Cells written before the fingerprint was portable carry the one of the trial's absolute path; they are
    still taken as finished (and copied by --reuse), and a changed trial is not."""
    import json
    from dataclasses import replace

    from raytestbed.experiments.cell import finished_cells, finished_summary
    from raytestbed.resources import package_root

    cell = _cell(str(package_root() / TRIAL))
    new, legacy = cell.fingerprints
    assert new != legacy
    folder = tmp_path / "cells" / "c"
    folder.mkdir(parents=True)
    (folder / "summary.json").write_text(json.dumps({"total_jct_s": 1.0}))
    (folder / "cell.json").write_text(json.dumps({"fingerprint": legacy}))
    assert finished_summary(folder, cell) == {"total_jct_s": 1.0}
    assert legacy in finished_cells([tmp_path])
    changed = replace(cell, seed=2)
    assert finished_summary(folder, changed) is None
