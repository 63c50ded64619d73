"""The partition count is one deployment setting: topics are specified with it, and a mismatch is a
one-line error that says what to do."""

from __future__ import annotations

import pytest
from streamcrawl_contracts.topics import ALL_TOPICS, ARCHIVE, DEAD_LETTER, DEFAULT_PARTITIONS, HOST_KEYED, URLS, Key
from streamcrawl_runtime.kafka_topics import TopicMismatch, check_counts
from streamcrawl_runtime.settings import StackSettings


def _counts(partitions: int) -> dict[str, int]:
    return {t.name: t.partitions(partitions) for t in ALL_TOPICS}


def test_every_host_keyed_topic_takes_the_setting() -> None:
    assert {t.partitions(24) for t in HOST_KEYED} == {24}
    assert all(t.key is Key.HOST for t in HOST_KEYED) and len(HOST_KEYED) == len(ALL_TOPICS) - 2
    assert DEAD_LETTER.partitions(24) == 1  # unkeyed: fixed, whatever the setting
    assert ARCHIVE.key is Key.FETCH and ARCHIVE.partitions(24) == 24  # spread like the crawl it archives


def test_the_setting_defaults_to_64_and_reads_streamcrawl_partitions(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("STREAMCRAWL_PARTITIONS", raising=False)
    assert StackSettings().partitions == DEFAULT_PARTITIONS == 64
    monkeypatch.setenv("STREAMCRAWL_PARTITIONS", "12")
    assert StackSettings().partitions == 12
    monkeypatch.setenv("STREAMCRAWL_PARTITIONS", "0")
    with pytest.raises(ValueError):
        StackSettings()


def test_matching_counts_pass() -> None:
    check_counts(_counts(16), 16)


def test_another_count_is_one_line_that_says_what_to_do() -> None:
    counts = _counts(8)
    with pytest.raises(TopicMismatch) as err:
        check_counts(counts, 64)
    msg = str(err.value)
    assert "\n" not in msg
    assert msg.startswith("kafka: topic streamcrawl.seeds has 8 partitions but STREAMCRAWL_PARTITIONS is 64")
    assert "STREAMCRAWL_PARTITIONS=8" in msg and "reset" in msg


def test_one_topic_off_is_found() -> None:
    counts = _counts(16)
    counts[URLS.name] = 17
    with pytest.raises(TopicMismatch, match=r"streamcrawl\.urls has 17 partitions"):
        check_counts(counts, 16)


def test_the_fixed_topic_is_checked_against_its_own_count() -> None:
    counts = _counts(16)
    counts[DEAD_LETTER.name] = 3
    with pytest.raises(TopicMismatch, match="dead_letter has 3 partitions, the registry says 1"):
        check_counts(counts, 16)


def test_a_missing_topic_is_an_error_for_services_not_for_provisioning() -> None:
    counts = _counts(16)
    del counts[URLS.name]
    with pytest.raises(TopicMismatch, match=r"streamcrawl\.urls does not exist: run the provisioning"):
        check_counts(counts, 16)
    check_counts(counts, 16, require=False)  # provisioning creates it
