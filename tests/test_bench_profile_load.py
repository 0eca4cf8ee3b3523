"""``raytestbed bench profile-load``: the load comparison and its no-load control."""

from benchmarks.profile_load import compare_model, main


def test_two_rounds_carry_a_quiet_against_quiet_control_and_one_round_says_it_has_none():
    two = compare_model("mlp-tiny", load=0, rounds=2, repeats=3, warmup=1)
    assert two["layers"] == 4 and len(two["layer_diffs"]) == 4
    assert isinstance(two["quiet_vs_quiet_max_layer_diff"], float)
    assert 0 <= two["quiet_vs_quiet_within_5pct"] <= 4
    one = compare_model("mlp-tiny", load=0, rounds=1, repeats=3, warmup=1)
    assert one["quiet_vs_quiet_max_layer_diff"] is None


def test_the_table_has_the_control_column(capsys, tmp_path):
    assert main(["--models", "mlp-tiny", "--load", "0", "--rounds", "2", "--repeats", "3",
                 "--out", str(tmp_path / "r.json")]) == 0
    out = capsys.readouterr().out
    assert "control: quiet round 1 vs 2" in out and "| mlp-tiny | 4 |" in out
    assert (tmp_path / "r.json").is_file()
