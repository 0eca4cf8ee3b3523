"""The report's training-loss section (real compute): one distinguishable line per job, fast-forwarded
stretches marked, and a per-job table of first and last loss."""

import pandas as pd

from raytestbed.results.report import _job_style, _loss_plot, loss_table


def test_loss_section_counts_only_clear_falls_and_tables_every_job(tmp_path):
    rows = [{"job_id": 0, "iteration": i, "loss": 2.0 * 0.9 ** (i / 10)} for i in (0, 1, 2, 50, 51)]  # -42 %
    rows += [{"job_id": 1, "iteration": i, "loss": 1.0 + 0.01 * i} for i in range(4)]  # rises
    rows += [{"job_id": 2, "iteration": i, "loss": 2.30 - 0.02 * i} for i in range(6)]  # -4 %: not clear
    pd.DataFrame(rows).to_csv(tmp_path / "iterations.csv", index=False)
    text = _loss_plot(tmp_path)
    assert "in 1 of 3 jobs" in text and (tmp_path / "loss.png").is_file()
    assert "fast-forwarded (not trained)" not in text  # legend lives in the PNG; the text names the dotting
    assert "| job | first_iteration | first_loss | last_iteration | last_loss |" in text
    tab = loss_table(pd.DataFrame(rows))
    assert list(tab["fell"]) == [True, False, False]
    assert tab.loc[0, "fast_forwarded"] == 47 and tab.loc[0, "trained"] == 5
    assert tab.loc[2, "first_loss"] == 2.30 and abs(tab.loc[2, "last_loss"] - 2.20) < 1e-12


def test_job_styles_are_distinct_beyond_twenty_jobs():
    styles = {(tuple(_job_style(k)["color"]), _job_style(k)["linestyle"]) for k in range(80)}
    assert len(styles) == 80


def test_no_loss_no_section(tmp_path):
    pd.DataFrame([{"job_id": 0, "iteration": 0, "loss": float("nan")}]).to_csv(tmp_path / "iterations.csv",
                                                                            index=False)
    assert _loss_plot(tmp_path) == "" and not (tmp_path / "loss.png").exists()
    assert _loss_plot(tmp_path / "missing") == ""


def test_a_job_without_a_finite_loss_keeps_its_row_and_counts_as_not_fallen(tmp_path):
    """A real-compute job whose loss is NaN every iteration (as a replica with no samples gave) is
    listed, says so, and is in the count's denominator, instead of silently leaving the table."""
    rows = [{"job_id": 0, "iteration": i, "loss": 2.0 * 0.5 ** i} for i in range(4)]
    rows += [{"job_id": 5, "iteration": i, "loss": float("nan")} for i in range(4)]
    pd.DataFrame(rows).to_csv(tmp_path / "iterations.csv", index=False)
    text = _loss_plot(tmp_path)
    assert "in 1 of 2 jobs" in text
    row = next(line for line in text.splitlines() if line.startswith("| 5 |"))
    assert "no loss" in row and row.rstrip(" |").endswith("no")
    tab = loss_table(pd.DataFrame(rows))
    assert list(tab["job"]) == [0, 5] and list(tab["fell"]) == [True, False] and tab.loc[1, "trained"] == 4
