"""schemathesis over the server's own OpenAPI document: every route, bounded examples.

Properties: no 5xx, and every answer is what the document says (status codes, content types,
bodies, ``Allow`` on 405s). The document describes the bodies routes read themselves, and
V2 model names are this server's, so generated requests reach the handlers' logic.
"""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import (
    allow_header_conformance,
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from tests.support.server import running_server

pytestmark = pytest.mark.e2e

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    allow_header_conformance,
]


@schemathesis.serializer("application/sdp")
def _sdp(_context, value) -> bytes:
    """WHIP and WHEP bodies: the generated text as it is (surrogates too: the server must say
    it is not UTF-8)."""
    return str(value).encode("utf-8", "surrogatepass")


@pytest.fixture(scope="module")
def fuzzed_server(tmp_path_factory):
    sinks = str(tmp_path_factory.mktemp("sinks"))
    with running_server(sink_dir=sinks, max_pipelines="2") as process:
        yield process


@pytest.fixture(scope="module")
def api_schema(fuzzed_server):
    return schemathesis.openapi.from_url(f"{fuzzed_server.url}/openapi.json")


schema = schemathesis.pytest.from_fixture("api_schema")


@schema.parametrize()
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
def test_the_api_keeps_its_contract(case, fuzzed_server):
    case.call_and_validate(base_url=fuzzed_server.url, checks=CHECKS, timeout=60)
