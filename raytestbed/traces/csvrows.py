"""Reading a trace CSV row by row, with the header and row shape checked once for every loader.

:func:`csv_rows` opens a CSV file (gzip-compressed if its name ends in ``.gz``), checks that
its header has the required columns, and yields each data row with the place it came from
(``"<file> line <N>"``, N counted as the CSV reader counts lines), so every loader reports a
bad cell as ``<file> line <N>: column 'x': reason``. Problems with the file itself raise
:class:`~raytestbed.errors.TraceError` naming the file (and line, for a bad row shape).

:func:`parse_number` is the one check of a numeric cell that every loader uses: a missing
value, text that is not a number, NaN or infinity, a fraction in an integer column, a negative
value (unless allowed), zero where a positive value is needed, and a value above the column's
limit (:data:`MAX_SECONDS` for times, :data:`MAX_INT` for integers) are each refused with a
one-line :class:`~raytestbed.errors.TraceError` that quotes the cell.
"""

from __future__ import annotations

import csv
import gzip
import math
from collections.abc import Iterator, Sequence
from pathlib import Path

from raytestbed.errors import TraceError

#: Largest time a trace may hold, seconds (1e10 s is about 317 years: UNIX submit times are
#: about 1.5e9 s; a larger value is almost surely a unit error such as milliseconds).
MAX_SECONDS = 1e10
#: Largest integer cell (2**53: every integer up to it is exact as a float).
MAX_INT = 2 ** 53


def parse_number(raw: str | None, where: str, col: str, kind: type = float, *, allow_negative: bool = False,
                 positive: bool = False, maximum: float | None = None) -> float | int:
    """A trace cell as a number; TraceError ``<where>: column 'col': reason`` otherwise.

    Args:
        raw: the cell text (``None`` or blank: missing).
        where: ``"<file> line <N>"`` (from :func:`csv_rows`).
        col: the column name, quoted in the message.
        kind: ``float`` or ``int`` (an integer column accepts ``3`` and ``3.0``, not ``3.5``).
        allow_negative: accept values below 0 (default: refused).
        positive: refuse 0 as well.
        maximum: the largest value accepted (default: :data:`MAX_INT` for ``int``, none for ``float``;
            pass :data:`MAX_SECONDS` for a time column).

    Raises:
        TraceError: naming the place, the column and the cell text.
    """
    if raw is None or str(raw).strip() == "":
        raise TraceError(f"{where}: column {col!r}: missing value")
    try:
        v = float(raw)
    except ValueError:
        raise TraceError(f"{where}: column {col!r}: {raw!r} is not a number") from None
    if not math.isfinite(v):
        raise TraceError(f"{where}: column {col!r}: {raw!r} is not a finite number")
    if kind is int and v != int(v):
        raise TraceError(f"{where}: column {col!r}: {raw!r} is not an integer")
    if v < 0 and not allow_negative:
        raise TraceError(f"{where}: column {col!r}: {raw!r} is negative")
    if v == 0 and positive:
        raise TraceError(f"{where}: column {col!r}: {raw!r} must be > 0")
    limit = maximum if maximum is not None else (MAX_INT if kind is int else None)
    if limit is not None and abs(v) > limit:
        raise TraceError(f"{where}: column {col!r}: {raw!r} is above the limit {limit:g}"
                         + (" s (about 317 years; a unit error?)" if limit == MAX_SECONDS else ""))
    return int(v) if kind is int else v


def _open(path: Path):
    if path.suffix == ".gz":
        return gzip.open(path, "rt", newline="", encoding="utf-8")
    return open(path, newline="", encoding="utf-8")


def csv_rows(path: Path | str, required: Sequence[str | tuple[str, ...]], *, exact_header: bool = False,
             skipinitialspace: bool = False) -> Iterator[tuple[str, dict[str, str | None]]]:
    """Yield ``(where, row)`` for every data row of the CSV file ``path``.

    ``where`` is ``"<path> line <N>"``; ``row`` maps column name -> cell text.

    Args:
        path: the file; a name ending in ``.gz`` is read through gzip.
        required: columns the header must have (any order; other columns allowed), else
            ``TraceError("<path>: missing column 'x' (header: ...)")``; an entry that is a
            tuple of names needs at least one of them. A row with more values than columns
            raises ``"<where>: more values than columns"``.
        exact_header: the header (cells stripped) must be exactly ``required``, else
            ``"<path> line 1: expected header ..., got ..."``; every non-empty row must then
            have exactly that many values (``"<where>: N values, expected M"``).
        skipinitialspace: ignore blanks after each delimiter (``csv`` dialect option).

    Raises:
        TraceError: the file cannot be opened or decoded, or its header/row shape is wrong.
    """
    path = Path(path)
    try:
        f = _open(path)
    except OSError as e:
        raise TraceError(f"{path}: cannot read: {e.strerror or e}") from None
    with f:
        try:
            if exact_header:
                yield from _exact_rows(f, path, tuple(required), skipinitialspace)
            else:
                yield from _dict_rows(f, path, required, skipinitialspace)
        except (OSError, EOFError, gzip.BadGzipFile, UnicodeDecodeError, csv.Error) as e:
            raise TraceError(f"{path}: cannot read: {e}") from None


def _dict_rows(f, path: Path, required, skipinitialspace: bool):
    reader = csv.DictReader(f, skipinitialspace=skipinitialspace)
    header = reader.fieldnames or []
    for col in required:
        if isinstance(col, tuple):
            if not any(c in header for c in col):
                raise TraceError(f"{path}: needs " + " or ".join(f"{_a(c)} {c!r}" for c in col) + " column")
        elif col not in header:
            raise TraceError(f"{path}: missing column {col!r} (header: {', '.join(header)})")
    for row in reader:
        where = f"{path} line {reader.line_num}"
        if None in row:
            raise TraceError(f"{where}: more values than columns")
        yield where, row


def _a(word: str) -> str:
    return "an" if word[:1] in "aeiou" else "a"


def _exact_rows(f, path: Path, columns: tuple[str, ...], skipinitialspace: bool):
    reader = csv.reader(f, skipinitialspace=skipinitialspace)
    header = [h.strip() for h in next(reader, [])]
    if tuple(header) != columns:
        raise TraceError(f"{path} line 1: expected header {','.join(columns)}, got {','.join(header)}")
    for rec in reader:
        where = f"{path} line {reader.line_num}"
        if not rec:
            continue
        if len(rec) != len(columns):
            raise TraceError(f"{where}: {len(rec)} values, expected {len(columns)}")
        yield where, dict(zip(columns, rec))
