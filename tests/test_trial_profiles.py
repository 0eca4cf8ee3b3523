"""A trial's ``profiles:`` folder: model profiles that replace the shipped ones (e.g. the H100 set).

Checks: the shipped GPU set covers every preset and says it was measured with CUDA events; the
default profiles are untouched by it; a trial naming it builds its jobs from it (the simulator's
times change accordingly), a folder beside the trial file works, a missing one is refused in one
line naming the field and the shipped sets; the emulator's real compute maps stages with the
trial's profiles (a model the trial's profiles lack is refused before anything starts).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from raytestbed.config import load_trial
from raytestbed.core.cluster import Cluster
from raytestbed.core.profile import ModelProfile, default_profile_dir, default_profiles
from raytestbed.emu.backend import check_real_compute
from raytestbed.errors import ConfigError
from raytestbed.models import PRESETS
from raytestbed.resources import package_dir
from raytestbed.traces.jobs import build_job
from raytestbed.trial import _trial_jobs

H100 = default_profile_dir() / "h100"


def _trial(tmp_path: Path, **extra) -> Path:
    doc = yaml.safe_load((package_dir("trials") / "demo_emu.yaml").read_text())
    doc["workload"]["path"] = str((package_dir("trials") / doc["workload"]["path"]).resolve())
    doc.update(extra)
    p = tmp_path / "trial.yaml"
    p.write_text(yaml.safe_dump(doc))
    return p


def test_the_h100_set_covers_every_preset_measured_with_cuda_events():
    names = {f.stem for f in H100.glob("*.json")}
    assert names == set(PRESETS)
    for f in H100.glob("*.json"):
        prof = ModelProfile.load(f)
        assert prof.model == f.stem
        assert prof.device.startswith("cuda (NVIDIA H100")
        assert prof.measurement["device"] == "cuda" and "CUDA events" in prof.measurement["method"]
        model = PRESETS[prof.model].build(0)
        assert prof.batch_size == model.batch_size and len(prof.layers) == model.num_layers


def test_the_default_profiles_are_not_replaced_by_a_subfolder():
    assert default_profiles()["resnet-small"].device.startswith("cpu")


def test_a_trial_naming_the_h100_set_builds_its_jobs_from_it(tmp_path):
    loaded = load_trial(_trial(tmp_path, profiles="h100"))
    assert loaded.profiles_dir == H100
    gpu = _trial_jobs(loaded, 1)
    cpu = _trial_jobs(load_trial(_trial(tmp_path)), 1)
    h100 = {f.stem: ModelProfile.load(f) for f in H100.glob("*.json")}
    for a, b in zip(gpu, cpu):
        assert a.model == b.model and a.gpus == b.gpus
        assert sum(s.profile.fwd_s + s.profile.bwd_s for s in a.stages) == pytest.approx(
            h100[a.model].total_compute_s, rel=1e-12)
        assert a.stages != b.stages
    assert loaded.resolved()["profiles"] == str(H100.resolve())  # config.yaml names the folder it used


def test_a_profile_folder_beside_the_trial_file(tmp_path):
    (tmp_path / "mine").mkdir()
    doc = json.loads((H100 / "mlp-tiny.json").read_text())
    doc["layers"][0]["fwd_s"] = 1.0
    (tmp_path / "mine" / "mlp-tiny.json").write_text(json.dumps(doc))
    profiles = load_trial(_trial(tmp_path, profiles="mine")).profiles
    assert profiles["mlp-tiny"].layers[0].fwd_s == 1.0
    assert profiles["resnet-small"] == default_profiles()["resnet-small"]  # the others stay the shipped ones


def test_a_missing_profile_folder_is_refused_in_one_line(tmp_path):
    with pytest.raises(ConfigError) as e:
        load_trial(_trial(tmp_path, profiles="a100"))
    msg = str(e.value)
    assert "profiles" in msg and "'a100'" in msg and "h100" in msg and "\n" not in msg


def test_a_bad_profile_file_is_refused_when_the_trial_loads(tmp_path):
    (tmp_path / "bad").mkdir()
    shutil.copy(H100 / "mlp-tiny.json", tmp_path / "bad" / "mlp-tiny.json")
    (tmp_path / "bad" / "broken.json").write_text("{not json")
    with pytest.raises(ConfigError, match="broken.json"):
        load_trial(_trial(tmp_path, profiles="bad"))


def test_real_compute_maps_stages_with_the_trials_profiles():
    cluster = Cluster.homogeneous(2, 2, 1e9, 1e10)
    job = build_job(0, 0.0, default_profiles()["mlp-tiny"], 2, "pipeline", 10, num_stages=2)
    check_real_compute(cluster, [job])  # the shipped profiles know mlp-tiny
    with pytest.raises(ConfigError, match="job 0"):
        check_real_compute(cluster, [job], profiles={})  # the trial's profiles do not
