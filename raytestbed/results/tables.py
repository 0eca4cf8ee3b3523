"""The table writers: Markdown for reports and docs (:func:`md_table`), padded plain text for the terminal
(:func:`text_table`). Light (no plotting imports), so commands and paper modules can use them."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # (only a type here: the CLI imports this module before pandas)
    import pandas as pd


def _fmt(v, digits: int = 4) -> str:
    if isinstance(v, float):
        return f"{v:.{digits}g}"
    return "-" if v is None else str(v).replace("|", "\\|")  # a '|' (in a placement) stays in its cell


def md_table(df: pd.DataFrame, digits: int = 4) -> str:
    """A Markdown table of ``df`` (floats to ``digits`` significant digits, None as -): the one table writer."""
    cols = [str(c) for c in df.columns]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for _, r in df.iterrows():
        lines.append("| " + " | ".join(_fmt(v, digits) for v in r) + " |")
    return "\n".join(lines)


def text_table(rows: list[dict], cols: list[str]) -> str:
    """A plain-text table of ``rows`` (dicts) in columns ``cols``, padded to width (floats to 4 significant
    digits, None as -): what the commands print on a terminal."""
    def fmt(v):
        if isinstance(v, float):
            return f"{v:.4g}" if abs(v) < 1e5 else f"{v:.4e}"
        return "-" if v is None else str(v)

    cells = [[fmt(r.get(c)) for c in cols] for r in rows]
    widths = [max(len(c), *(len(x[i]) for x in cells)) for i, c in enumerate(cols)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(cols, widths))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(x.ljust(w) for x, w in zip(row, widths)) for row in cells]
    return "\n".join(lines)
