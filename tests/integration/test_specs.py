"""The published specifications stay true to the code: drift checks, the official validators, live
fuzzing of the REST surface, and every protocol message checked against the checked-in schemas."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml
from hypothesis import given, settings
from jsonschema import Draft202012Validator
from openapi_spec_validator import validate
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from smart_transfer.protocol import codec
from smart_transfer.protocol import messages as m
from smart_transfer.protocol.asyncapi import FLOW_MESSAGES
from smart_transfer.protocol.flows import FLOWS
from tests.conftest import ROOT, ServerProcess
from tests.unit.test_protocol import messages

ASYNCAPI = ROOT / "asyncapi" / "smart-transfer.asyncapi.yaml"
OPENAPI = ROOT / "openapi" / "smart-transfer.openapi.yaml"
SHARING_OPENAPI = ROOT / "openapi" / "delta-sharing.openapi.yaml"
VALIDATOR = ROOT / "tools" / "asyncapi-validate"


def load(path: Path) -> dict[str, Any]:
    document = yaml.safe_load(path.read_text())
    assert isinstance(document, dict)
    return document


def test_checked_in_documents_match_the_code() -> None:
    result = subprocess.run(
        [sys.executable, "scripts/specs.py", "--check"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr


def test_openapi_document_is_valid_and_covers_every_route() -> None:
    document = load(OPENAPI)
    validate(document)  # type: ignore[arg-type]
    assert set(document["paths"]) == {
        "/",
        "/{dataset}",
        "/{dataset}/refs/head",
        "/{dataset}/blocks/{block_hash}",
        "/{dataset}/{kind}/{object_hash}",
        "/healthz",
        "/readyz",
        "/metrics",
    }
    assert set(document["paths"]["/{dataset}/refs/head"]) == {"get", "head", "put"}


def test_delta_sharing_document_is_valid_and_covers_every_route() -> None:
    document = load(SHARING_OPENAPI)
    validate(document)  # type: ignore[arg-type]
    assert document["servers"] == [{"url": "/delta-sharing"}]
    table = "/shares/{share}/schemas/{schema}/tables/{table}"
    assert set(document["paths"]) == {
        "/shares",
        "/shares/{share}",
        "/shares/{share}/schemas",
        "/shares/{share}/schemas/{schema}/tables",
        "/shares/{share}/all-tables",
        *(f"{table}/{leaf}" for leaf in ("version", "metadata", "query", "changes")),
    }
    query = document["paths"][f"{table}/query"]["post"]["responses"]
    assert "Delta-Table-Version" in query["200"]["headers"] and "422" not in query
    assert {"400", "401", "403", "404"} <= set(query)


def test_asyncapi_document_passes_the_official_parser() -> None:
    if not (VALIDATOR / "node_modules" / "@asyncapi" / "parser").exists():
        pytest.fail("the AsyncAPI parser is not installed: `make test` (or `make node-deps`) installs it")
    result = subprocess.run(
        ["node", str(VALIDATOR / "validate.mjs"), str(ASYNCAPI)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "valid AsyncAPI 3.0.0" in result.stdout


def test_asyncapi_channels_carry_exactly_the_messages_of_each_flow() -> None:
    document = load(ASYNCAPI)
    for flow, table in FLOWS.items():
        in_table = {m.name_of(kind) for (_, _, kind) in table} | {"Error"}
        in_document = set(document["channels"][flow]["messages"])
        assert in_table == in_document == {m.name_of(kind) for kind in FLOW_MESSAGES[flow]}
        for line in table:
            phase, sender, kind = line
            assert (
                f"{phase.value} --{sender.value}: {m.name_of(kind)}--> {table[line].value}"
                in document["channels"][flow]["description"]
            )


_DOCUMENT = load(ASYNCAPI)
_REGISTRY = Registry().with_resource("urn:asyncapi", Resource(contents=_DOCUMENT, specification=DRAFT202012))


def _validator(name: str) -> Draft202012Validator:
    schema = {"$ref": f"urn:asyncapi#/components/schemas/{name}"}
    return Draft202012Validator(schema, registry=_REGISTRY)


@settings(max_examples=300)
@given(messages)
def test_every_message_the_code_sends_fits_the_published_schema(message: m.Message) -> None:
    payload = orjson.loads(codec.encode(message))
    errors = list(_validator(type(message).__name__).iter_errors(payload))
    assert errors == [], errors[0].message


def test_the_published_schemas_reject_what_the_code_rejects() -> None:
    bad = {"type": "DatasetPullRequest", "begin_after": "not-a-hash", "force_update_if_diverged": False}
    assert list(_validator("DatasetPullRequest").iter_errors(bad))
    with pytest.raises(Exception):  # noqa: B017 - the codec refuses it too
        codec.decode(orjson.dumps(bad).decode())


@pytest.mark.parametrize("document", ["/openapi.json", "/delta-sharing/openapi.json"])
def test_schemathesis_finds_no_server_error_and_no_schema_violation(
    server_factory: object, tmp_path: Path, document: str
) -> None:
    server: ServerProcess = server_factory()  # type: ignore[operator]
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "schemathesis.cli",
            "run",
            f"{server.url}{document}",
            "--checks",
            "not_a_server_error,status_code_conformance,content_type_conformance,"
            "response_schema_conformance,response_headers_conformance",
            "--max-examples",
            "30",
            "--seed",
            "20261120",
            "--phases",
            "examples,coverage,fuzzing",
        ],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-4000:]
    assert " passed" in result.stdout
