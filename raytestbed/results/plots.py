"""Plots of results (matplotlib, headless)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402


def comparison_bars(df: pd.DataFrame, path: Path, title: str = "") -> None:
    """Side-by-side bars of total JCT and makespan per policy (seconds)."""
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    labels = df["policy"].astype(str).tolist()
    for ax, col, name in ((axes[0], "total_jct_s", "total JCT (s)"), (axes[1], "makespan_s", "makespan (s)")):
        ax.bar(labels, df[col].astype(float), color="tab:blue")
        ax.set_ylabel(name)
        ax.tick_params(axis="x", rotation=30)
        ax.grid(axis="y", alpha=0.3)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
