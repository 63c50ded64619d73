"""The acsylla session's row shape (no Cassandra here): rows are named tuples whose fields are the column
names made identifiers, so ``[applied]`` of a lightweight transaction reads as ``row.applied``, and one
class serves every result with the same columns."""

from __future__ import annotations

from streamcrawl_runtime.cql import _clean, _row_class


def test_column_names_become_identifiers() -> None:
    assert _clean("[applied]") == "applied"
    assert _clean("url_fp") == "url_fp"
    assert _clean("system.count(*)") == "system_count"


def test_one_row_class_per_column_list() -> None:
    row = _row_class(("[applied]", "canonical_url"))(False, "http://a.test/")
    assert row.applied is False and row.canonical_url == "http://a.test/"
    assert _row_class(("[applied]", "canonical_url")) is type(row)
    assert _row_class(("applied",)) is not type(row)
