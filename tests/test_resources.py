"""The one resolver (raytestbed/resources.py): shipped files through importlib.resources, and the order
in which a user-given name is looked up (the path as given / the user's folder, then the package)."""

from __future__ import annotations

import pytest

from raytestbed.config import load_trial
from raytestbed.errors import ConfigError
from raytestbed.models.registry import MODELS_DIR
from raytestbed.core.profile import default_profile_dir
from raytestbed.resources import KINDS, package_dir, package_files, package_root, resolve


def test_every_kind_has_its_shipped_files():
    for kind in KINDS:
        assert package_files(kind), kind
    assert MODELS_DIR == package_dir("models") and default_profile_dir() == package_dir("profiles")
    assert {p.name for p in package_files("clusters")} >= {"laptop.yaml", "asrpt_sim_250x8.yaml"}


def test_names_resolve_from_any_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    shipped = package_dir("trials") / "demo.yaml"
    assert resolve("demo", "trials") == shipped
    assert resolve("demo.yaml", "trials") == shipped
    assert resolve("workloads/trials/demo.yaml", "trials") == shipped  # written as in the source tree
    assert resolve("laptop", "clusters") == package_dir("clusters") / "laptop.yaml"
    t = load_trial("demo_emu")  # its trace slice (../traces/...) and cluster resolve inside the package
    assert t.path == package_dir("trials") / "demo_emu.yaml" and t.base_dir == package_dir("trials")


def test_the_users_file_comes_first(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "demo.yaml").write_text("name: mine\n")
    assert resolve("demo", "trials") == tmp_path / "demo.yaml"
    trial_dir = tmp_path / "trials"
    trial_dir.mkdir()
    (trial_dir / "laptop.yaml").write_text("x")
    assert resolve("laptop", "clusters", [trial_dir]) == trial_dir / "laptop.yaml"
    assert resolve("laptop", "clusters", [tmp_path]) == package_dir("clusters") / "laptop.yaml"


def test_a_missing_name_is_one_line_naming_where_it_looked(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as e:
        load_trial("no_such_trial")
    msg = str(e.value)
    assert "trial file 'no_such_trial' not found" in msg and str(tmp_path) in msg and "demo_emu" in msg
    assert "\n" not in msg
    with pytest.raises(ConfigError, match="cluster 'nowhere' not found"):
        resolve("nowhere", "clusters", [tmp_path], what="cluster")
    with pytest.raises(ConfigError, match="not found"):
        resolve(tmp_path / "absent.yaml", "trials")  # an absolute path is only itself


def test_the_package_root_holds_the_shipped_folders():
    root = package_root()
    assert (root / "workloads" / "trials").is_dir() and (root / "cluster_configs").is_dir()
