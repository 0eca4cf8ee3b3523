"""Model zoo and stage profiler: real training, true tensor sizes in profiles."""

import pytest
import torch

from raytestbed.cli import main
from raytestbed.core.profile import ModelProfile
from raytestbed.models import PRESETS, build_model
from raytestbed.profile.profiler import profile_model


@pytest.mark.parametrize("name", ["mlp-tiny", "gpt-tiny"])
def test_training_is_real_loss_decreases(name):
    m = build_model(name, seed=0)
    opt = torch.optim.SGD(m.layers.parameters(), lr=0.05 if name == "mlp-tiny" else 0.5)
    first = m.train_step(optimizer=opt)
    for _ in range(15):
        last = m.train_step(optimizer=opt)
    assert last < first


def test_stage_is_contiguous_layer_range():
    m = build_model("mlp-tiny")
    x = m.make_input(3)
    full = m.stage(0, m.num_layers)(x)
    split = m.stage(2, m.num_layers)(m.stage(0, 2)(x))
    assert torch.allclose(full, split)
    with pytest.raises(ValueError):
        m.stage(3, 2)


def test_profiler_bytes_are_true_tensor_sizes():
    m = build_model("mlp-tiny")  # widths 256-512-512-256 -> 10, batch 16, float32
    prof = profile_model(m, warmup=0, repeats=1)
    assert [l.out_bytes for l in prof.layers] == [16 * 512 * 4, 16 * 512 * 4, 16 * 256 * 4, 0.0]
    assert prof.layers[0].param_bytes == (256 * 512 + 512) * 4
    assert prof.layers[3].param_bytes == (256 * 10 + 10) * 4
    assert sum(l.param_bytes for l in prof.layers) == m.parameter_bytes()
    assert all(l.fwd_s > 0 and l.bwd_s > 0 for l in prof.layers)


def test_profiler_gpt_embedding_activation_and_stage_sums():
    m = build_model("gpt-tiny")  # d 128, seq 64, batch 2
    prof = profile_model(m, warmup=0, repeats=1)
    assert prof.layers[0].out_bytes == 2 * 64 * 128 * 4
    assert prof.layers[0].param_bytes == (1024 * 128 + 64 * 128) * 4
    st = prof.stage_profiles([0, 2])
    assert st[0].out_bytes == prof.layers[1].out_bytes
    assert st[1].param_bytes == sum(l.param_bytes for l in prof.layers[2:])


def test_profile_cli_writes_loadable_profile(tmp_path, capsys):
    out = tmp_path / "p.json"
    assert main(["profile", "mlp-tiny", "--out", str(out), "--repeats", "1", "--warmup", "0",
                 "--stages", "0,2"]) == 0
    prof = ModelProfile.load(out)
    assert prof.model == "mlp-tiny" and prof.num_layers == 4
    assert "stage" in capsys.readouterr().out
    assert main(["profile", "nosuch", "--out", str(tmp_path / "x.json")]) == 2
    assert not (tmp_path / "x.json").exists()


def test_presets_listed():
    assert {"gpt-small", "vgg19-cifar", "resnet-small", "mlp-tiny"} <= set(PRESETS)


MY_MODEL = '''
import torch
from torch import nn
from torch.nn import functional as F

from raytestbed.models import LayeredModel, model_preset


@model_preset("my-mlp", "a user's MLP 32-64 -> 4, batch 8")
def my_mlp(seed: int) -> LayeredModel:
    torch.manual_seed(seed)
    layers = nn.ModuleList([nn.Sequential(nn.Linear(32, 64), nn.ReLU()), nn.Linear(64, 4)])
    xs, ys = torch.randn(32, 32), torch.randint(0, 4, (32,))
    return LayeredModel("my-mlp", layers, ["fc", "out"], lambda b: xs[:b], lambda b: ys[:b], F.cross_entropy, 8)
'''


def test_the_model_definitions_are_files_in_workloads_models():
    from raytestbed.models.registry import MODELS_DIR

    assert MODELS_DIR.name == "models" and MODELS_DIR.parent.name == "workloads"
    assert {PRESETS[n].source for n in ("gpt-tiny", "vgg19-cifar", "resnet-small", "mlp-tiny")} == {
        str(MODELS_DIR / f) for f in ("gpt.py", "vgg.py", "resnet.py", "mlp.py")}


def test_a_dropped_in_model_file_is_found_by_name(tmp_path, monkeypatch, capsys):
    (tmp_path / "mine.py").write_text(MY_MODEL)
    monkeypatch.setenv("RAYTESTBED_MODELS_DIR", str(tmp_path))
    assert "my-mlp" in PRESETS and "gpt-tiny" in PRESETS
    m = build_model("my-mlp", seed=1)
    assert m.num_layers == 2 and m.parameter_bytes() == (32 * 64 + 64 + 64 * 4 + 4) * 4
    assert main(["profile", "--list"]) == 0 and "my-mlp" in capsys.readouterr().out
    out = tmp_path / "p.json"
    assert main(["profile", "my-mlp", "--repeats", "1", "--warmup", "0", "--out", str(out)]) == 0
    prof = ModelProfile.load(out)
    assert prof.num_layers == 2 and prof.layers[0].out_bytes == 8 * 64 * 4
    monkeypatch.delenv("RAYTESTBED_MODELS_DIR")
    assert "my-mlp" not in PRESETS


@pytest.mark.parametrize("body, needle", [("raise RuntimeError('boom')\n", "boom"),
                                          (MY_MODEL.replace("my-mlp\", \"a user", "gpt-tiny\", \"a user"),
                                           "already defined")])
def test_a_broken_model_file_is_a_one_line_error(tmp_path, monkeypatch, capsys, body, needle):
    (tmp_path / "bad.py").write_text(body)
    monkeypatch.setenv("RAYTESTBED_MODELS_DIR", str(tmp_path))
    assert main(["profile", "--list"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and needle in err and "bad.py" in err
