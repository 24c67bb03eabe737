"""Schemathesis against the live OpenAPI schema of a real `mmrag serve` process.

Every operation is called with generated valid and invalid requests; each reply must not be a
5xx and must conform to the schema (documented status, content type, headers and body). The
short run keeps `make test` fast; `make test-slow` runs the long one.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import positive_data_acceptance

from tests.helpers import running_mmrag_server

FUZZ_SETTINGS = {
    "deadline": None,
    "derandomize": True,  # the same requests on every run and machine
    "suppress_health_check": list(HealthCheck),
}


@pytest.fixture(scope="module")
def live_schema(hybrid_index: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator:
    log = tmp_path_factory.mktemp("fuzz") / "serve.log"
    # A short generation deadline and small answers keep each generated question cheap.
    flags = ("--max-tokens", "24")
    with running_mmrag_server(hybrid_index, log, *flags) as base:
        yield schemathesis.openapi.from_url(f"{base}/openapi.json")


def operations() -> list[tuple[str, str]]:
    """Every (path, method) of the schema; it does not depend on the index served."""
    from mmrag.core.settings import Settings
    from mmrag.service.app import create_app

    paths = create_app(Settings()).openapi()["paths"]
    return [(path, method.upper()) for path, item in paths.items() for method in item]


def fuzz(schema, path: str, method: str, examples: int) -> None:
    # An upload must also decode as an image, which no JSON Schema can say: a schema-valid
    # upload of random bytes is rightly refused there, so that one check does not apply to
    # forms. The server here has no detector, so /v1/ground answers every valid request with
    # its 404.
    @given(case=schema[path][method].as_strategy())
    @settings(max_examples=examples, **FUZZ_SETTINGS)
    def conforms(case) -> None:
        upload = case.media_type == "multipart/form-data" or path == "/v1/ground"
        case.call_and_validate(excluded_checks=[positive_data_acceptance] if upload else [])

    conforms()


@pytest.mark.parametrize(("path", "method"), operations())
def test_the_api_conforms_to_its_schema_and_never_fails_with_5xx(live_schema, path, method):
    fuzz(live_schema, path, method, examples=8)


@pytest.mark.slow
@pytest.mark.parametrize(("path", "method"), operations())
def test_the_api_conforms_under_a_long_fuzzing_run(live_schema, path, method):
    fuzz(live_schema, path, method, examples=300)
