"""WLCG tokens end to end on the testbed that requires them: real gfal2 against the real XRootD doors (davs://
with HTTP-TPC pull and push, root:// native), the Tape REST door and XCache, each URL with its own token of the
testbed's issuer, and what the storage does with a token that lacks a scope, names another storage, or is bogus."""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from typing import Any

import gfal2
import pytest

from measure.cache import cache_study
from measure.cleanup import copies_delete
from measure.context import gfal2_context_new
from measure.io import io_probe
from measure.staging import stage_files
from measure.testfiles import test_file
from measure.tokens import (
    ClientCredentials,
    TokenContext,
    TokenError,
    TokenRequest,
    audience_of,
    scope_path,
    token_redacted,
)
from measure.transfer import transfer_file
from testbed.client import testbed_token_source as issuer_of
from testbed.grid import Testbed
from testbed.issuer import token_mint

pytestmark = [pytest.mark.testbed, pytest.mark.tokens]

MB = 1_000_000


def contexts(bed: Testbed, grants: list[tuple[str, str]]) -> Any:
    """A gfal2 context whose URLs get their tokens from the testbed's issuer (the client-credentials grant)."""
    return TokenContext(gfal2_context_new(), issuer_of(bed), grants)


def bearer_context(url: str, token: str) -> Any:
    ctx = gfal2_context_new()
    ctx.set_opt_boolean("HTTP PLUGIN", "RETRIEVE_BEARER_TOKEN", False)
    ctx.cred_set(url, ctx.cred_new("BEARER", token))
    return ctx


def source_file(bed: Testbed, door: str, size: int = 2 * MB) -> str:
    """The test file of `size` on door's site, made through the door with an upload token."""
    base = bed.url(door)
    return test_file(contexts(bed, [(f"{base}/portal-testfiles/", "overwrite")]), base, size, checksum="ADLER32")


def destination(bed: Testbed, door: str) -> str:
    return bed.url(door, f"portal-runs/run-tokens-{uuid.uuid4().hex[:8]}/file-0")


# --- the doors refuse what they must ------------------------------------------------------------------------------


def test_a_davs_listing_with_a_bogus_bearer_token_is_refused(token_testbed: Testbed) -> None:
    url = token_testbed.url("t0.https")
    with pytest.raises(gfal2.GError) as refused:
        bearer_context(url, "bogus").listdir(url)
    assert "403" in refused.value.message
    # The same listing with a token of the issuer for this door is allowed: the refusal was the token's.
    token = token_mint(
        token_testbed.issuer_files,
        issuer=token_testbed.issuer_url,
        scopes=["storage.read:/data"],
        audience=audience_of(url),
    )
    assert isinstance(bearer_context(url, token).listdir(url), list)


def test_a_token_for_another_storage_is_refused(token_testbed: Testbed) -> None:
    url, other = token_testbed.url("t0.https"), token_testbed.url("t1a.https")
    token = token_mint(
        token_testbed.issuer_files,
        issuer=token_testbed.issuer_url,
        scopes=["storage.read:/data"],
        audience=audience_of(other),
    )
    with pytest.raises(gfal2.GError) as refused:
        bearer_context(url, token).listdir(url)
    assert "403" in refused.value.message


def test_a_root_stat_without_a_token_is_refused_and_with_one_allowed(token_testbed: Testbed) -> None:
    url = token_testbed.url("t0.root")
    with pytest.raises(gfal2.GError) as refused:
        gfal2_context_new().stat(url)
    assert refused.value.code == 13  # EACCES
    assert contexts(token_testbed, [(url + "/", "read")]).stat(url).st_size >= 0


@pytest.mark.parametrize("door", ["t1a.https", "t1a.root"])
def test_a_token_with_a_read_scope_only_cannot_write(token_testbed: Testbed, door: str) -> None:
    scheme = door.split(".")[1]
    source = source_file(token_testbed, f"t0.{scheme}")
    target = destination(token_testbed, door)
    ctx = contexts(token_testbed, [(source, "read"), (target, "read")])
    outcome = transfer_file(ctx, source, target, mode="pull" if scheme == "https" else "native", timeout=60)
    assert not outcome.ok
    directory = scope_path(target.rsplit("/", 1)[0])
    assert f"the storage refused the token: it lacks storage.create:{directory}" in outcome.error
    assert f"(asked: storage.read:{directory} for {audience_of(target)})" in outcome.error
    with pytest.raises(gfal2.GError):
        contexts(token_testbed, [(target, "write")]).stat(target)  # nothing was written


# --- copies with a token per URL ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source_door", "destination_door", "mode"),
    [
        ("t0.https", "t1a.https", "pull"),
        ("t0.https", "t1a.https", "push"),
        ("t0.https", "t1b.https", "streamed"),
        ("t0.root", "t1a.root", "native"),
    ],
)
def test_copies_with_least_privilege_tokens_succeed_and_check_their_checksums(
    token_testbed: Testbed, source_door: str, destination_door: str, mode: str
) -> None:
    source = source_file(token_testbed, source_door)
    target = destination(token_testbed, destination_door)
    ctx = contexts(token_testbed, [(source, "read"), (target, "write")])
    outcome = transfer_file(ctx, source, target, mode=mode, timeout=60)
    assert outcome.ok, outcome.error
    assert outcome.mode == mode
    assert outcome.bytes == 2 * MB
    assert len(outcome.checksum) == 8
    directory = scope_path(target.rsplit("/", 1)[0])
    assert sorted((request.audience, request.scopes) for request in ctx.requests) == sorted(
        [
            (audience_of(source), ("storage.read:/data/portal-testfiles",)),
            (audience_of(target), (f"storage.create:{directory}", f"storage.read:{directory}")),
        ]
    )
    assert "Bearer%20ey" not in json.dumps(outcome.details)  # root:// URLs carry tokens: never in what is kept


def test_the_clean_up_deletes_with_a_modify_token_and_not_without(token_testbed: Testbed) -> None:
    source = source_file(token_testbed, "t0.https")
    target = destination(token_testbed, "t1a.https")
    directory = target.rsplit("/", 1)[0]
    assert transfer_file(contexts(token_testbed, [(source, "read"), (target, "write")]), source, target, mode="pull").ok
    refused = copies_delete(contexts(token_testbed, [(target, "write")]), [target], [directory])
    assert refused.deleted == 0
    assert "the storage refused the token: it lacks storage.modify" in refused.errors[0]
    done = copies_delete(
        contexts(token_testbed, [(target, "delete"), (directory + "/", "delete")]), [target], [directory]
    )
    assert (done.deleted, done.errors) == (1, [])
    with pytest.raises(gfal2.GError):
        contexts(token_testbed, [(directory + "/", "read")]).stat(directory)


def test_the_clean_up_of_a_root_directory_with_tokens_leaves_someone_elses_file(token_testbed: Testbed) -> None:
    source = source_file(token_testbed, "t0.root")
    mine = destination(token_testbed, "t1b.root")
    directory = mine.rsplit("/", 1)[0]
    theirs = f"{directory}/theirs"
    for target in (mine, theirs):
        assert transfer_file(contexts(token_testbed, [(source, "read"), (target, "write")]), source, target).ok
    on_disk = token_testbed.site_dir("t1b") / "data" / "data" / directory.split("//data/", 1)[1]
    deleting = contexts(token_testbed, [(directory + "/", "delete")])
    done = copies_delete(deleting, [mine], [directory])
    assert (done.deleted, done.errors) == (1, [])
    assert [path.name for path in on_disk.iterdir()] == ["theirs"]  # not empty: XRootD kept the directory
    done = copies_delete(deleting, [theirs], [directory])
    assert (done.deleted, done.errors) == (1, [])
    assert not on_disk.exists()


# --- staging and the cache ----------------------------------------------------------------------------------------


def test_a_recall_through_tape_rest_needs_storage_stage(token_testbed: Testbed) -> None:
    path = f"token-recall-{uuid.uuid4().hex[:8]}/file-0"
    token_testbed.tape_put(path, os.urandom(200_000))
    url = token_testbed.url("tape.rest", path)
    refused = stage_files(contexts(token_testbed, [(url, "read")]), [url], timeout=10, poll_interval=0.5)
    assert not refused.files[0].ok
    assert "it lacks storage.stage:" in refused.files[0].error
    recalled = stage_files(contexts(token_testbed, [(url, "stage")]), [url], timeout=60, poll_interval=0.5)
    assert recalled.files[0].ok, recalled.files[0].error
    assert recalled.files[0].details["locality_before"] == "TAPE"
    assert recalled.files[0].details["timing"] == "server"  # the Tape REST polls carried the token as well


def test_the_cache_probe_reads_through_xcache_with_a_token(token_testbed: Testbed) -> None:
    path = f"token-cache-{uuid.uuid4().hex[:8]}/file-0"
    token_testbed.origin_put(path, os.urandom(400_000))
    origin = token_testbed.url("origin.root", path)
    through = token_testbed.cache_url_of(origin)
    ctx = contexts(token_testbed, [(origin, "read"), (through, "read")])
    result = cache_study(ctx, [origin], cache_url_of=token_testbed.cache_url_of, flush=token_testbed.cache_flush)
    assert [(outcome.details["path"], outcome.ok, outcome.error) for outcome in result.files] == [
        ("direct", True, ""),
        ("cache-empty", True, ""),
        ("cache-filled", True, ""),
    ]
    without = gfal2_context_new()
    with pytest.raises(gfal2.GError):
        without.stat(through)


@pytest.mark.parametrize("door", ["t1a.https", "t1a.root"])
def test_the_io_probe_writes_reads_and_deletes_with_its_token(token_testbed: Testbed, door: str) -> None:
    endpoint = token_testbed.url(door)
    result = io_probe(contexts(token_testbed, [(f"{endpoint}/io-probe/", "overwrite")]), endpoint, 300_000)
    assert [(outcome.mode, outcome.ok, outcome.error) for outcome in result.files] == [
        ("write", True, ""),
        ("read", True, ""),
    ]
    assert not list((token_testbed.site_dir("t1a") / "data" / "data" / "io-probe").iterdir())  # deleted after
    refused = io_probe(contexts(token_testbed, [(f"{endpoint}/io-probe/", "read")]), endpoint, 1000)
    assert "the storage refused the token: it lacks storage.create:/data/io-probe" in refused.files[0].error


# --- the token source ---------------------------------------------------------------------------------------------


def test_tokens_are_cached_until_shortly_before_they_expire(token_testbed: Testbed) -> None:
    client_id, secret = token_testbed.client_credentials()
    source = ClientCredentials(token_testbed.issuer_url, client_id, secret, ca_dir=str(token_testbed.pki.cert_dir))
    request = TokenRequest(audience_of(token_testbed.url("t0.https")), ("storage.read:/data",))
    first = source.token(request)
    assert source.token(request) == first
    token, _, margin = source._cache[request]
    source._cache[request] = (token, time.time() + margin - 1, margin)  # inside the refresh margin
    assert source.token(request) != first


def test_an_issuer_that_refuses_the_client_says_so(token_testbed: Testbed) -> None:
    client_id, _ = token_testbed.client_credentials()
    source = ClientCredentials(token_testbed.issuer_url, client_id, "wrong", ca_dir=str(token_testbed.pki.cert_dir))
    with pytest.raises(TokenError) as refused:
        source.token(TokenRequest("https://127.0.0.1:1", ("storage.read:/data",)))
    assert "refused: HTTP 401 invalid_client: unknown client or wrong secret" in str(refused.value)


def test_an_issuer_that_cannot_be_reached_says_so(token_testbed: Testbed) -> None:
    source = ClientCredentials("https://127.0.0.1:1", "portal", "x", ca_dir=str(token_testbed.pki.cert_dir))
    with pytest.raises(TokenError) as unreachable:
        source.token(TokenRequest("https://127.0.0.1:1", ("storage.read:/data",)))
    assert "the token issuer https://127.0.0.1:1 cannot be reached" in str(unreachable.value)


def test_tokens_never_stay_in_a_message() -> None:
    text = "open root://h:1//data/f?authz=Bearer%20eyJabc.def-ghi&x=1 failed; Authorization: Bearer eyJ.a.b"
    assert token_redacted(text) == ("open root://h:1//data/f?authz=<token>&x=1 failed; Authorization: Bearer <token>")


# --- the issuer and the Tape REST door answer bad input with a clear 4xx -----------------------------------------


def post_form(url: str, form: dict[str, str], bed: Testbed, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    request = urllib.request.Request(url, data=urllib.parse.urlencode(form).encode(), headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10, context=bed.ssl_context()) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as exc:
        return exc.code, json.load(exc)


def test_the_issuer_answers_bad_requests_with_oauth2_errors(token_testbed: Testbed) -> None:
    client_id, secret = token_testbed.client_credentials()
    good = {"grant_type": "client_credentials", "client_id": client_id, "client_secret": secret}
    endpoint = token_testbed.token_endpoint
    cases = [
        ({**good, "scope": "storage.read:/data", "client_secret": "x"}, 401, "invalid_client"),
        ({**good, "scope": "storage.read:/data", "grant_type": "password"}, 400, "unsupported_grant_type"),
        ({**good, "scope": "storage.write:/data"}, 400, "invalid_scope"),
        ({**good, "scope": "storage.read:data"}, 400, "invalid_scope"),
        (good, 400, "invalid_scope"),
    ]
    for form, status, error in cases:
        assert post_form(endpoint, form, token_testbed)[0:1] == (status,), form
        assert post_form(endpoint, form, token_testbed)[1]["error"] == error, form
    status, answer = post_form(
        endpoint, {**good, "scope": "storage.read:/data", "audience": "https://x"}, token_testbed
    )
    assert (status, answer["token_type"], answer["scope"]) == (200, "Bearer", "storage.read:/data")


def test_the_tape_rest_door_refuses_a_request_without_a_valid_token(token_testbed: Testbed) -> None:
    api = f"https://127.0.0.1:{token_testbed.ports()['tape.rest']}/api/v1/stage/"
    body = json.dumps({"files": [{"path": "/data/x"}]}).encode()
    for headers in ({}, {"Authorization": "Bearer bogus"}, {"Authorization": "Basic eDp5"}):
        request = urllib.request.Request(api, data=body, headers={"Content-Type": "application/json", **headers})
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=10, context=token_testbed.ssl_context())
        assert refused.value.code == 401, headers
        assert json.load(refused.value)["status"] == 401


def test_testbed_status_and_env_say_that_tokens_are_required(
    token_testbed: Testbed, settings: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from django.core.management import call_command

    settings.TESTBED_DIR = token_testbed.config.directory
    settings.TESTBED_BASE_PORT = token_testbed.config.base_port
    settings.TESTBED_TOKENS = "required"
    call_command("testbed", "status")
    assert f"tokens: required (WLCG JWTs of the issuer {token_testbed.issuer_url}, up;" in capsys.readouterr().out
    call_command("testbed", "env")
    exported = capsys.readouterr().out
    assert "export TOKEN_SOURCE=client-credentials\n" in exported
    assert f"export TOKEN_ISSUER={token_testbed.issuer_url}\n" in exported
    assert "BEARER_TOKEN=" not in exported
