"""csv_rows: the one header/row check behind every CSV trace loader."""

import gzip
import re

import pytest

from raytestbed.errors import TraceError
from raytestbed.traces.csvrows import MAX_SECONDS, csv_rows, parse_number


def _write(path, text):
    path.write_text(text)
    return path


def test_rows_with_their_place(tmp_path):
    p = _write(tmp_path / "t.csv", "a,b,c\n1,2,3\n\n4,5,6\n")
    rows = list(csv_rows(p, ("b", "a")))
    assert rows == [(f"{p} line 2", {"a": "1", "b": "2", "c": "3"}), (f"{p} line 4", {"a": "4", "b": "5", "c": "6"})]


def test_gzip_and_skipinitialspace(tmp_path):
    p = tmp_path / "t.csv.gz"
    with gzip.open(p, "wt") as f:
        f.write("a, b\n1, 2\n")
    assert list(csv_rows(p, ("a", "b"), skipinitialspace=True)) == [(f"{p} line 2", {"a": "1", "b": "2"})]


@pytest.mark.parametrize("text, kwargs, msg", [
    ("a,c\n1,2\n", {}, "{p}: missing column 'b' (header: a, c)"),
    ("a,b\n1,2\n1,2,3\n", {}, "{p} line 3: more values than columns"),
    ("a,c\n1,2\n", {"required": ("a", ("b", "iterations"))}, "{p}: needs a 'b' or an 'iterations' column"),
    ("a, b,c\n1,2,3\n", {"exact_header": True}, "{p} line 1: expected header a,b, got a,b,c"),
    ("a,b\n1,2\n1\n", {"exact_header": True}, "{p} line 3: 1 values, expected 2"),
])
def test_bad_header_or_row_names_file_and_line(tmp_path, text, kwargs, msg):
    p = _write(tmp_path / "t.csv", text)
    required = kwargs.pop("required", ("a", "b"))
    with pytest.raises(TraceError, match="^" + re.escape(msg.format(p=p)) + "$"):
        list(csv_rows(p, required, **kwargs))


def test_unreadable_file_is_one_line(tmp_path):
    with pytest.raises(TraceError, match="cannot read") as e:
        list(csv_rows(tmp_path / "absent.csv", ("a",)))
    assert "absent.csv" in str(e.value) and "\n" not in str(e.value)
    bad = tmp_path / "t.csv.gz"
    bad.write_bytes(b"not gzip")
    with pytest.raises(TraceError, match=re.escape(f"{bad}: cannot read")):
        list(csv_rows(bad, ("a",)))
    latin = tmp_path / "l.csv"
    latin.write_bytes(b"a\n\xe9\n")
    with pytest.raises(TraceError, match=re.escape(f"{latin}: cannot read")):
        list(csv_rows(latin, ("a",)))


def test_exact_header_rows_are_keyed_by_column(tmp_path):
    p = _write(tmp_path / "t.csv", " x , y\n1,2\n\n3,4\n")
    assert [r for _, r in csv_rows(p, ("x", "y"), exact_header=True)] == [{"x": "1", "y": "2"}, {"x": "3", "y": "4"}]


# ---- parse_number: the one check of a numeric cell

@pytest.mark.parametrize("raw, kwargs, reason", [
    (None, {}, "missing value"),
    ("  ", {}, "missing value"),
    ("abc", {}, "'abc' is not a number"),
    ("nan", {}, "'nan' is not a finite number"),
    ("NaN", {"allow_negative": True}, "'NaN' is not a finite number"),
    ("inf", {}, "'inf' is not a finite number"),
    ("-inf", {"allow_negative": True}, "'-inf' is not a finite number"),
    ("1e999", {}, "'1e999' is not a finite number"),
    ("-5", {}, "'-5' is negative"),
    ("2.5", {"kind": int}, "'2.5' is not an integer"),
    ("0", {"kind": int, "positive": True}, "'0' must be > 0"),
    ("2e10", {"maximum": MAX_SECONDS}, "'2e10' is above the limit 1e+10 s"),
    ("1e17", {"kind": int}, "'1e17' is above the limit"),
])
def test_parse_number_refuses_with_the_cell(raw, kwargs, reason):
    with pytest.raises(TraceError) as e:
        parse_number(raw, "t.csv line 7", "arrival_s", **kwargs)
    msg = str(e.value)
    assert msg.startswith(f"t.csv line 7: column 'arrival_s': {reason}") and "\n" not in msg


@pytest.mark.parametrize("raw, kwargs, value", [
    ("3", {}, 3.0), (" 3.5 ", {}, 3.5), ("3.0", {"kind": int}, 3), ("1e3", {"kind": int}, 1000),
    ("0", {}, 0.0), ("-2", {"allow_negative": True}, -2.0), ("1e10", {"maximum": MAX_SECONDS}, 1e10),
])
def test_parse_number_accepts(raw, kwargs, value):
    v = parse_number(raw, "w", "c", **kwargs)
    assert v == value and type(v) is type(value)
