"""The report's training-loss section (real compute): one line per job, gaps where iterations were skipped."""

import json

import pandas as pd

from raytestbed.results.report import _loss_plot


def test_loss_section_counts_jobs_whose_loss_fell(tmp_path):
    rows = [{"job_id": 0, "iteration": i, "loss": 2.0 - 0.1 * i} for i in (0, 1, 2, 50, 51)]
    rows += [{"job_id": 1, "iteration": i, "loss": 1.0 + 0.01 * i} for i in range(4)]
    pd.DataFrame(rows).to_csv(tmp_path / "iterations.csv", index=False)
    text = _loss_plot(tmp_path)
    assert "in 1 of 2 jobs" in text and (tmp_path / "loss.png").is_file()


def test_no_loss_no_section(tmp_path):
    pd.DataFrame([{"job_id": 0, "iteration": 0, "loss": float("nan")}]).to_csv(tmp_path / "iterations.csv",
                                                                            index=False)
    assert _loss_plot(tmp_path) == "" and not (tmp_path / "loss.png").exists()
    assert _loss_plot(tmp_path / "missing") == ""
    json.dumps({})
