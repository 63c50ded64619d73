"""The cached row factory gives the driver's rows (attribute access, cleaned names) without building a
namedtuple class per result set."""

from __future__ import annotations

from cassandra.query import named_tuple_factory
from streamcrawl_runtime.connect import _row_class, cached_named_tuple_factory


def test_rows_match_the_drivers_named_tuples() -> None:
    cols = ["[applied]", "host", "url_fp"]
    rows = [(True, "a.test", 7), (False, "b.test", -1)]
    ours = cached_named_tuple_factory(cols, rows)
    theirs = named_tuple_factory(cols, rows)
    assert ours == theirs
    assert [(r.applied, r.host, r.url_fp) for r in ours] == [(True, "a.test", 7), (False, "b.test", -1)]


def test_one_class_per_column_list() -> None:
    _row_class.cache_clear()
    a = cached_named_tuple_factory(["x", "y"], [(1, 2)])
    b = cached_named_tuple_factory(["x", "y"], [(3, 4)])
    assert type(a[0]) is type(b[0])
    assert _row_class.cache_info().misses == 1
    assert cached_named_tuple_factory(["x"], []) == []
