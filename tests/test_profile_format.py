"""Tests of the per-layer profile format (raytestbed.core.profile) and the PipeDream importer.

Units: seconds, bytes.
"""

from __future__ import annotations

import itertools
import json
import math
import random
from pathlib import Path

import pytest

from raytestbed.core.job import StageProfile
from raytestbed.core.profile import (
    LayerProfile,
    ModelProfile,
    default_profile_dir,
    default_profiles,
    linearize_dag,
    load_profile_dir,
)
from raytestbed.errors import ConfigError

REPO = Path(__file__).resolve().parents[1]


def _layer(name: str, fwd: float, bwd: float, out: float, par: float) -> LayerProfile:
    return LayerProfile(name=name, fwd_s=fwd, bwd_s=bwd, out_bytes=out, param_bytes=par)


@pytest.fixture
def five() -> ModelProfile:
    """Hand-made 5-layer profile; compute (fwd+bwd) = [4, 1, 1, 1, 1] s."""
    return ModelProfile(
        model="toy",
        batch_size=8,
        source="hand-made",
        device="none",
        layers=(
            _layer("l0", 1.0, 3.0, 100.0, 10.0),
            _layer("l1", 0.25, 0.75, 200.0, 20.0),
            _layer("l2", 0.5, 0.5, 300.0, 0.0),
            _layer("l3", 0.5, 0.5, 400.0, 40.0),
            _layer("l4", 0.5, 0.5, 0.0, 50.0),
        ),
    )


def _import_script():
    from raytestbed.profile import pipedream

    return pipedream


# ------------------------------------------------------------------ round trip
def test_save_load_round_trip(tmp_path: Path, five: ModelProfile) -> None:
    odd = ModelProfile(
        model="odd",
        batch_size=3,
        source="ünïcode, \"quotes\"",
        device="cpu (1 core)",
        layers=(_layer("a", 0.1 + 0.2, 1e-9, 1.5e9, 3.0), _layer("b", 1 / 3, 0.0, 0.0, 0.0)),
    )
    for prof in (five, odd):
        f = tmp_path / "sub" / f"{prof.model}.json"
        prof.save(f)
        back = ModelProfile.load(f)
        assert back == prof
        assert ModelProfile.from_dict(prof.to_dict()) == prof
        assert not list(f.parent.glob("*.tmp"))  # temp file replaced, not left behind
    text = (tmp_path / "sub" / "toy.json").read_text()
    d = json.loads(text)
    assert list(d) == ["format_version", "model", "batch_size", "source", "device", "layers"]
    assert d["format_version"] == 1
    assert list(d["layers"][0]) == ["name", "fwd_s", "bwd_s", "out_bytes", "param_bytes"]
    five.save(tmp_path / "again.json")
    assert (tmp_path / "again.json").read_text() == text  # stable output


def test_load_profile_dir(tmp_path: Path, five: ModelProfile) -> None:
    five.save(tmp_path / "a.json")
    (tmp_path / "notes.txt").write_text("ignored")
    assert load_profile_dir(tmp_path) == {"toy": five}
    five.save(tmp_path / "b.json")
    with pytest.raises(ConfigError, match="toy"):
        load_profile_dir(tmp_path)
    with pytest.raises(ConfigError, match="not found"):
        load_profile_dir(tmp_path / "nope")


# ---------------------------------------------------------------------- stages
def test_totals(five: ModelProfile) -> None:
    assert five.num_layers == 5
    assert five.total_compute_s == pytest.approx(8.0)
    assert five.total_param_bytes == pytest.approx(120.0)


def test_stage_profiles_sums_and_cuts(five: ModelProfile) -> None:
    st = five.stage_profiles([0, 2, 4])
    assert st == [
        StageProfile(fwd_s=1.25, bwd_s=3.75, out_bytes=200.0, param_bytes=30.0),
        StageProfile(fwd_s=1.0, bwd_s=1.0, out_bytes=400.0, param_bytes=40.0),
        StageProfile(fwd_s=0.5, bwd_s=0.5, out_bytes=0.0, param_bytes=50.0),
    ]
    whole = five.stage_profiles([0])
    assert whole == [StageProfile(fwd_s=2.75, bwd_s=5.25, out_bytes=0.0, param_bytes=120.0)]
    per_layer = five.stage_profiles(range(5))
    assert [s.out_bytes for s in per_layer] == [100.0, 200.0, 300.0, 400.0, 0.0]
    assert math.fsum(s.compute_s for s in per_layer) == pytest.approx(five.total_compute_s)


@pytest.mark.parametrize(
    "bad, words",
    [
        ([], "empty"),
        ([1, 3], "boundaries[0]"),
        ([0, 2, 2], "strictly increasing"),
        ([0, 3, 2], "strictly increasing"),
        ([0, 5], "num_layers"),
        ([0, 1.5], "boundaries[1]"),
    ],
)
def test_stage_profiles_rejects_bad_boundaries(five: ModelProfile, bad: list, words: str) -> None:
    with pytest.raises(ConfigError) as ei:
        five.stage_profiles(bad)
    assert words in str(ei.value)
    assert "\n" not in str(ei.value)


# ------------------------------------------------------------------ even split
def test_even_split_hand_example(five: ModelProfile) -> None:
    assert five.even_split(2) == [0, 1]  # [4] | [1, 1, 1, 1]
    assert five.even_split(1) == [0]
    assert five.even_split(5) == [0, 1, 2, 3, 4]
    assert five.even_split(3) in ([0, 1, 3],)  # [4] | [1, 1] | [1, 1]
    for bad in (0, 6, -1):
        with pytest.raises(ConfigError, match="num_stages"):
            five.even_split(bad)


def _brute(costs: list[float], k: int) -> tuple[float, float]:
    """(min bottleneck, min sum of squared stage costs among splits with that bottleneck)."""
    n = len(costs)
    best = (math.inf, math.inf)
    for cuts in itertools.combinations(range(1, n), k - 1):
        b = [0, *cuts, n]
        parts = [sum(costs[b[i] : b[i + 1]]) for i in range(k)]
        best = min(best, (max(parts), sum(x * x for x in parts)))
    return best


def test_even_split_is_optimal_against_brute_force() -> None:
    rng = random.Random(7)
    for _ in range(60):
        n = rng.randint(1, 9)
        costs = [rng.choice([0.0, 0.5, 1.0, 2.0, 3.0, 7.0]) for _ in range(n)]
        prof = ModelProfile(
            model="r", batch_size=1, source="", device="",
            layers=tuple(_layer(f"l{i}", c, 0.0, 0.0, 0.0) for i, c in enumerate(costs)),
        )
        for k in range(1, n + 1):
            b = prof.even_split(k)
            assert b == prof.even_split(k)  # deterministic
            assert len(b) == k
            st = prof.stage_profiles(b)  # validates boundaries
            parts = [s.compute_s for s in st]
            assert (max(parts), sum(x * x for x in parts)) == _brute(costs, k)


# ------------------------------------------------------------------ validation
def _valid_dict(five: ModelProfile) -> dict:
    return five.to_dict()


def test_from_dict_negative_time_names_field_and_index(five: ModelProfile) -> None:
    d = _valid_dict(five)
    d["layers"][2]["bwd_s"] = -0.1
    with pytest.raises(ConfigError) as ei:
        ModelProfile.from_dict(d, where="toy.json")
    msg = str(ei.value)
    assert "toy.json" in msg and "layers[2]" in msg and "bwd_s" in msg


@pytest.mark.parametrize("field", ["model", "batch_size", "source", "device", "layers", "format_version"])
def test_from_dict_missing_top_field(five: ModelProfile, field: str) -> None:
    d = _valid_dict(five)
    del d[field]
    with pytest.raises(ConfigError, match=field):
        ModelProfile.from_dict(d)


@pytest.mark.parametrize("field", ["name", "fwd_s", "bwd_s", "out_bytes", "param_bytes"])
def test_from_dict_missing_layer_field(five: ModelProfile, field: str) -> None:
    d = _valid_dict(five)
    del d["layers"][1][field]
    with pytest.raises(ConfigError) as ei:
        ModelProfile.from_dict(d, where="f.json")
    assert field in str(ei.value) and "layers[1]" in str(ei.value)


@pytest.mark.parametrize(
    "mutate, words",
    [
        (lambda d: d.update(batch_size=0), "batch_size"),
        (lambda d: d.update(batch_size=True), "batch_size"),
        (lambda d: d.update(format_version=2), "format_version"),
        (lambda d: d.update(layers=[]), "layers"),
        (lambda d: d.update(extra=1), "extra"),
        (lambda d: d["layers"][0].update(fwd_s="1"), "layers[0].fwd_s"),
        (lambda d: d["layers"][0].update(fwd_s=float("nan")), "layers[0].fwd_s"),
        (lambda d: d["layers"][3].update(flops=1.0), "flops"),
        (lambda d: d["layers"][4].update(out_bytes=5.0), "layers[4].out_bytes"),
    ],
)
def test_from_dict_rejects(five: ModelProfile, mutate, words: str) -> None:
    d = _valid_dict(five)
    mutate(d)
    with pytest.raises(ConfigError) as ei:
        ModelProfile.from_dict(d)
    assert words in str(ei.value)


def test_load_bad_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        ModelProfile.load(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ConfigError, match="bad.json.*line 1"):
        ModelProfile.load(bad)


def test_layer_profile_rejects_negative() -> None:
    with pytest.raises(ConfigError, match="param_bytes"):
        _layer("x", 0.0, 0.0, 0.0, -1.0)


# ----------------------------------------------------------- DAG linearisation
def test_cut_sizes_with_skip_connection() -> None:
    # a -> b, a -> c, b -> c ; own output sizes a=10, b=20, c=40
    nodes = [_layer("a", 1.0, 1.0, 10.0, 0.0), _layer("b", 1.0, 1.0, 20.0, 0.0), _layer("c", 1.0, 1.0, 40.0, 0.0)]
    out = linearize_dag(nodes, [("a", "b"), ("a", "c"), ("b", "c")])
    assert [x.name for x in out] == ["a", "b", "c"]
    assert [x.out_bytes for x in out] == [10.0, 30.0, 0.0]  # size(a), size(a)+size(b), last = 0


def test_linearize_orders_by_kahn_with_ties_by_position() -> None:
    # diamond given out of order: s -> {x, y} -> t ; side sink z fed by x
    nodes = [
        _layer("s", 0, 0, 1.0, 0), _layer("y", 0, 0, 2.0, 0), _layer("x", 0, 0, 4.0, 0),
        _layer("t", 0, 0, 8.0, 0), _layer("z", 0, 0, 16.0, 0),
    ]
    edges = [("s", "x"), ("s", "y"), ("x", "t"), ("y", "t"), ("x", "z")]
    out = linearize_dag(nodes, edges)
    assert [n.name for n in out] == ["s", "y", "x", "t", "z"]
    # after s: s ; after y: s (to x) + y ; after x: y + x (x feeds z at the end) ; after t: x ; last 0
    assert [n.out_bytes for n in out] == [1.0, 3.0, 6.0, 4.0, 0.0]
    with pytest.raises(ConfigError, match="cycle"):
        linearize_dag(nodes[:2], [("s", "y"), ("y", "s")])
    with pytest.raises(ConfigError, match="unknown node"):
        linearize_dag(nodes[:2], [("s", "q")])


def test_importer_parses_tiny_graph() -> None:
    mod = _import_script()
    text = (
        "node2 -- Conv2d(3, 8) -- forward_compute_time=2.000, backward_compute_time=4.000, "
        "activation_size=200.0, parameter_size=32.000\n"
        "node1 -- Input -- forward_compute_time=1.500, backward_compute_time=0.000, "
        "activation_size=100.0, parameter_size=0.000\n"
        "node3 -- LSTM(8, 8) -- forward_compute_time=1.000, backward_compute_time=1.000, "
        "activation_size=[30.0; 5.0; 5.0], parameter_size=64.000\n"
        "\tnode1 -- node2\n\tnode1 -- node3\n\tnode2 -- node3\n"
    )
    nodes, edges = mod.parse_graph(text)
    assert [n.node_id for n in nodes] == ["node1", "node2", "node3"]
    assert nodes[2].act_bytes == (30.0, 5.0, 5.0)
    layers = mod.to_layers(nodes, edges)
    assert [lay.name for lay in layers] == ["node1 Input", "node2 Conv2d(3, 8)", "node3 LSTM(8, 8)"]
    assert [lay.fwd_s for lay in layers] == [0.0015, 0.002, 0.001]
    assert [lay.out_bytes for lay in layers] == [100.0, 300.0, 0.0]
    with pytest.raises(ConfigError, match="unrecognised"):
        mod.parse_graph("garbage line\n")


# ---------------------------------------------------------- shipped profiles
def test_default_dir_is_repo_workloads() -> None:
    assert default_profile_dir() == REPO / "workloads" / "profiles"


def test_shipped_vgg16_matches_source_table() -> None:
    profs = default_profiles()
    for m in ("vgg16", "resnet50", "inception_v3", "alexnet", "gnmt"):
        assert m in profs, m
    vgg = profs["vgg16"]
    assert vgg.model == "vgg16" and vgg.num_layers == 41
    assert vgg.batch_size == 128  # input 77,070,336 B = 128 x 3x224x224 x 4 B
    # SOURCE.md table: fwd 251.9 ms, bwd 438.6 ms, params "527.8 MB" -- that column is MiB:
    # the file's parameter bytes sum to ~553.4e6 B = 527.8 * 2**20 B.
    assert vgg.total_fwd_s == pytest.approx(0.2519, rel=0.005)
    assert vgg.total_bwd_s == pytest.approx(0.4386, rel=0.005)
    assert vgg.total_param_bytes == pytest.approx(527.8 * 2**20, rel=0.005)
    assert vgg.total_param_bytes != pytest.approx(527.8e6, rel=0.005)
    assert vgg.layers[-1].out_bytes == 0.0
    # a chain: the cut after the last MaxPool (node32, position 31) before the classifier
    assert vgg.layers[31].name.startswith("node32 MaxPool2d")
    assert vgg.layers[31].out_bytes == 12845056.0
    assert default_profiles() is not default_profiles()  # fresh dict each call
