"""The token requests a step asks for (least privilege by URL and access), the token sources that need no issuer
(a token file, the host's credentials), what a run notes of them, and the token source the settings choose."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from measure.context import ProbeContext
from measure.tokens import (
    ClientCredentials,
    HostCredentials,
    TokenError,
    TokenFile,
    TokenRedactingFilter,
    TokenRequest,
    audience_of,
    grants_requests,
    token_request,
)
from runs.credentials import token_source_from_settings


def test_a_copy_reads_its_source_and_creates_in_its_destination_directory() -> None:
    source = token_request("root://se.example:1094//data/portal-testfiles/random-1000", "read")
    destination = token_request("davs://se.example:443/data/portal-runs/run-1-ab/file-0", "write")
    assert source == TokenRequest("root://se.example:1094", ("storage.read:/data/portal-testfiles",))
    assert destination == TokenRequest(
        "https://se.example:443",
        ("storage.read:/data/portal-runs/run-1-ab", "storage.create:/data/portal-runs/run-1-ab"),
    )


def test_deleting_overwriting_and_staging_ask_for_their_own_scopes() -> None:
    directory = "roots://se.example:1094//data/portal-runs/run-1-ab/"
    assert token_request(directory, "delete", directory=True).scopes == (
        "storage.read:/data/portal-runs/run-1-ab",
        "storage.modify:/data/portal-runs/run-1-ab",
    )
    assert token_request("https://tape.example/data/t/f", "stage").scopes == (
        "storage.read:/data/t",
        "storage.stage:/data/t",
    )
    assert "storage.modify:/data/x" in token_request("davs://h:1/data/x/f", "overwrite").scopes
    assert audience_of(directory) == "root://se.example:1094"
    with pytest.raises(ValueError, match="access must be one of"):
        token_request("davs://h:1/data/x/f", "write-everything")


def test_grants_of_one_directory_become_one_request_with_both_scope_sets() -> None:
    requests = grants_requests([("davs://h:1/data/d/a", "read"), ("davs://h:1/data/d/", "delete")])
    assert [(prefix, request.scopes) for prefix, _, request in requests] == [
        ("davs://h:1/data/d", ("storage.modify:/data/d", "storage.read:/data/d"))
    ]


def test_a_token_file_is_read_at_every_use_and_says_what_is_wrong(tmp_path: Path) -> None:
    path = tmp_path / "bt_u0"
    source = TokenFile(str(path))
    request = TokenRequest("https://h:1", ("storage.read:/",))
    with pytest.raises(TokenError, match=f"the token file {path} cannot be read"):
        source.token(request)
    path.write_text("\n")
    with pytest.raises(TokenError, match="is empty"):
        source.token(request)
    path.write_text("first\n")
    assert source.token(request) == "first"
    path.write_text("renewed by oidc-agent\n")
    assert source.token(request) == "renewed by oidc-agent"


def test_a_run_notes_its_tokens_audiences_and_scopes_never_the_token(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("eyJsecret")
    context = ProbeContext()
    context.token_source = TokenFile(str(tmp_path / "token"))
    note = context.credential([("davs://h:1/data/src/f", "read"), ("root://g:2//data/dst/f", "write")])
    assert note == {
        "kind": "token",
        "source": "file",
        "path": str(tmp_path / "token"),
        "requests": [
            {"audience": "https://h:1", "scopes": ["storage.read:/data/src"]},
            {"audience": "root://g:2", "scopes": ["storage.create:/data/dst", "storage.read:/data/dst"]},
        ],
    }
    assert "eyJsecret" not in str(note)


def test_the_hosts_credentials_are_x509_when_it_holds_a_proxy_else_none() -> None:
    assert HostCredentials({"X509_USER_PROXY": "/tmp/x509up_u0"}).describe() == {"kind": "x509", "source": "x509"}
    assert HostCredentials({}).describe() == {"kind": "none", "source": "none"}
    assert ProbeContext().gfal2_context([("davs://h:1/data/f", "read")]).__class__.__name__ == "Gfal2Context"


def test_no_token_reaches_a_log_record() -> None:
    record = logging.LogRecord("gfal2", logging.INFO, "", 0, "> Authorization: Bearer %s", ("eyJa.b.c",), None)
    TokenRedactingFilter().filter(record)
    assert record.getMessage() == "> Authorization: Bearer <token>"


@pytest.mark.parametrize(
    ("overrides", "kind"),
    [
        ({"TOKEN_SOURCE": ""}, None),
        ({"TOKEN_SOURCE": "x509"}, "x509"),
        ({"TOKEN_SOURCE": "file", "BEARER_TOKEN_FILE": "/run/user/0/bt_u0"}, "file"),
        (
            {
                "TOKEN_SOURCE": "client-credentials",
                "TOKEN_ISSUER": "https://iam.example/",
                "TOKEN_CLIENT_ID": "portal",
                "TOKEN_CLIENT_SECRET": "s",
            },
            "client-credentials",
        ),
    ],
)
def test_the_settings_choose_one_token_source(settings: Any, overrides: dict[str, str], kind: str | None) -> None:
    for name, value in overrides.items():
        setattr(settings, name, value)
    source = token_source_from_settings()
    assert (source.name if source is not None else None) == kind
    if isinstance(source, ClientCredentials):
        assert source.issuer == "https://iam.example"


def test_a_workers_own_log_handlers_redact_tokens_too() -> None:
    from portal.celery import tokens_redacted_in_logs

    logger = logging.getLogger("celery-worker-like")
    handler = logging.StreamHandler()
    logger.addHandler(handler)
    try:
        tokens_redacted_in_logs(logger=logger)
        record = logging.LogRecord("x", logging.INFO, "", 0, "stat root://h//f?authz=Bearer%20eyJa.b.c", None, None)
        assert handler.filter(record)
        assert record.getMessage() == "stat root://h//f?authz=<token>"
    finally:
        logger.removeHandler(handler)
