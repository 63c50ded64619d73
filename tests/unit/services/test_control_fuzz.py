"""schemathesis against the control plane's own OpenAPI spec (in-memory ports): generated requests, valid
and invalid, authenticated, never get a server error, and every answer matches its documented schema."""

from __future__ import annotations

import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance, status_code_conformance
from streamcrawl_control.app import create_app
from streamcrawl_runtime.memory import InMemoryControlStore, InMemoryMetrics, InMemorySeedSink, InMemoryStats

TOKEN = "fuzz-token"
app = create_app(InMemorySeedSink(), InMemoryControlStore(), InMemoryStats(), InMemoryMetrics(), token=TOKEN)
schema = schemathesis.openapi.from_asgi("/openapi.json", app)


@schema.parametrize()
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_server_errors_and_answers_match_the_spec(case: schemathesis.Case) -> None:
    case.headers = {**(case.headers or {}), "Authorization": f"Bearer {TOKEN}"}
    response = case.call()
    case.validate_response(response, checks=(not_a_server_error, response_schema_conformance,
                                             status_code_conformance))
