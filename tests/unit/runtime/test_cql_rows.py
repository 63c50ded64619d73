"""The acsylla session's row shape and error mapping (no Cassandra here): rows are named tuples whose fields
are the column names made identifiers, so ``[applied]`` of a lightweight transaction reads as
``row.applied``, and one class serves every result with the same columns; "down or slow" driver errors
become TransientError."""

from __future__ import annotations

import pytest
from streamcrawl_runtime.acsylla_session import _AS_TRANSIENT, _TRANSIENT, _clean, _row_class
from streamcrawl_runtime.ports.errors import TransientError


def test_column_names_become_identifiers() -> None:
    assert _clean("[applied]") == "applied"
    assert _clean("url_fp") == "url_fp"
    assert _clean("system.count(*)") == "system_count"


def test_one_row_class_per_column_list() -> None:
    row = _row_class(("[applied]", "canonical_url"))(False, "http://a.test/")
    assert row.applied is False and row.canonical_url == "http://a.test/"
    assert _row_class(("[applied]", "canonical_url")) is type(row)
    assert _row_class(("applied",)) is not type(row)


@pytest.mark.parametrize("error", _TRANSIENT)
def test_down_or_slow_driver_errors_become_transient(error: type[BaseException]) -> None:
    with pytest.raises(TransientError) as info, _AS_TRANSIENT:
        raise error("engine away")
    assert isinstance(info.value.__cause__, error) and "engine away" in str(info.value)


def test_other_errors_pass_through_as_they_are() -> None:
    with pytest.raises(ValueError, match="bad statement"), _AS_TRANSIENT:
        raise ValueError("bad statement")
    with _AS_TRANSIENT:
        pass  # no error, nothing raised
