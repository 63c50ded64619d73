"""What a consumer refuses before any handler sees it: a newer major schema_version (named, never
mis-read) and oversized URL fields. Older and current versions are read; unknown fields are ignored."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError
from streamcrawl_contracts.messages import (
    MAX_URL_CHARS,
    MODELS,
    FetchRequest,
    ParsedPage,
    SeedMessage,
    UrlCandidates,
    UrlMessage,
)

EXAMPLES = {
    SeedMessage: {"url": "http://a.example/"},
    UrlMessage: {"url": "http://a.example/", "host": "a.example", "url_fp": 1},
    UrlCandidates: {"host": "a.example", "depth": 0, "source_url": "seed:x", "urls": ["http://a.example/"],
                    "url_fps": [1]},
    FetchRequest: {"url": "http://a.example/", "host": "a.example", "url_fp": 1, "lease_id": "L",
                   "lease_expires_at": 1.0},
}


@pytest.mark.parametrize("model", list(EXAMPLES), ids=lambda m: m.__name__)
def test_a_newer_schema_version_is_refused_with_both_versions_named(model: type) -> None:
    body = {**EXAMPLES[model], "schema_version": model.SCHEMA_VERSION + 1}
    with pytest.raises(ValidationError) as err:
        model.model_validate_json(json.dumps(body))
    assert f"schema_version {model.SCHEMA_VERSION + 1} is newer than this consumer reads" in str(err.value)
    assert f"{model.__name__} {model.SCHEMA_VERSION}" in str(err.value)


@pytest.mark.parametrize("version", [0, -1])
def test_a_version_below_one_is_refused(version: int) -> None:
    with pytest.raises(ValidationError):
        SeedMessage.model_validate_json(json.dumps({"url": "http://a.example/", "schema_version": version}))


def test_the_current_version_and_unknown_fields_are_read() -> None:
    msg = UrlMessage.model_validate_json(json.dumps({**EXAMPLES[UrlMessage], "schema_version": 1,
                                                     "added_later": {"x": 1}}))
    assert msg.schema_version == 1 and msg.url == "http://a.example/"


@pytest.mark.parametrize("model,field", [(SeedMessage, "url"), (UrlMessage, "url"), (UrlMessage, "host"),
                                         (FetchRequest, "url"), (UrlCandidates, "source_url")],
                         ids=lambda v: v if isinstance(v, str) else v.__name__)
def test_an_oversized_url_field_is_refused(model: type, field: str) -> None:
    body = {**EXAMPLES[model], field: "http://a.example/" + "a" * MAX_URL_CHARS}
    with pytest.raises(ValidationError, match=f"at most {MAX_URL_CHARS} characters"):
        model.model_validate_json(json.dumps(body))


def test_list_items_and_links_are_bounded_too() -> None:
    long = "http://a.example/" + "a" * MAX_URL_CHARS
    with pytest.raises(ValidationError, match=f"at most {MAX_URL_CHARS} characters"):
        UrlCandidates.model_validate_json(json.dumps({**EXAMPLES[UrlCandidates], "urls": [long]}))
    page = {"url": "http://a.example/", "host": "a.example", "url_fp": 1, "fetched_at": "2025-01-01T00:00:00Z",
            "http_status": 200, "content_hash": "h", "storage_key": "k", "out_links": [long]}
    with pytest.raises(ValidationError, match=f"at most {MAX_URL_CHARS} characters"):
        ParsedPage.model_validate_json(json.dumps(page))


def test_every_model_carries_the_version_check() -> None:
    for name, model in MODELS.items():
        schema = model.model_json_schema()
        assert schema["properties"]["schema_version"]["minimum"] == 1, name
