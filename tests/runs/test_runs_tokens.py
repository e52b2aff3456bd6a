"""Runs with WLCG tokens, as DC24 ran: started through the API, copied by a real worker whose probe context asks
the token testbed's issuer for least-privilege tokens per run and storage, and saying what they used (never the
token). An issuer that refuses the client fails the run before its first copy, with the issuer's answer."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from rest_framework.test import APIClient

from common import processes
from measure.tokens import audience_of, scope_path
from results.models import TransferRecord
from runs.dispatch import served_queues_forget
from runs.models import Run, RunFile
from sites.services import sites_import
from testbed.grid import Testbed
from tests.runs.helpers import (
    purge_default_queue,
    start_worker,
    wait_for,
    wait_for_run_end,
    worker_env,
)

pytestmark = [
    pytest.mark.testbed,
    pytest.mark.tokens,
    pytest.mark.django_db(transaction=True, serialized_rollback=True),
]

MB = 1_000_000


def token_worker_env(bed: Testbed, **extra: str) -> dict[str, str]:
    """A worker of the token testbed: its probe context asks the testbed's issuer (TESTBED_TOKENS=required)."""
    return worker_env(
        TESTBED_DIR=str(bed.config.directory),
        TESTBED_BASE_PORT=str(bed.config.base_port),
        TESTBED_TOKENS="required",
        **extra,
    )


@pytest.fixture
def token_registry(token_testbed: Testbed) -> Testbed:
    sites_import(document=token_testbed.sites_document())
    return token_testbed


@pytest.fixture
def token_worker(token_testbed: Testbed, tmp_path: Path) -> Iterator[Path]:
    purge_default_queue()
    served_queues_forget()
    pidfile = start_worker(tmp_path, "w-tokens", concurrency=8, env=token_worker_env(token_testbed))
    try:
        yield pidfile
    finally:
        processes.stop(pidfile)
        served_queues_forget()


def start_through_api(coordinator: Any, **parameters: Any) -> Run:
    client = APIClient()
    client.force_authenticate(coordinator)
    response = client.post("/api/v1/runs/", {"kind": "transfer", "parameters": parameters}, format="json")
    assert response.status_code == 201, response.content
    return Run.objects.get(pk=response.json()["id"])


def run_as_the_api_says(coordinator: Any, run: Run) -> dict[str, Any]:
    client = APIClient()
    client.force_authenticate(coordinator)
    body: dict[str, Any] = client.get(f"/api/v1/runs/{run.pk}/").json()
    return body


@pytest.mark.parametrize("case", [("t0.root", "t1a.root", "native"), ("t0.https", "t1b.https", "pull")])
def test_a_run_through_the_api_copies_every_file_with_tokens_and_says_so(
    token_registry: Testbed, token_worker: Path, coordinator: Any, case: tuple[str, str, str]
) -> None:
    bed = token_registry
    source, destination, mode = case
    run = start_through_api(
        coordinator,
        source=bed.url(source),
        destinations=[bed.url(destination)],
        file_count=4,
        file_size=2 * MB,
        concurrency=2,
        copy_mode=mode,
        keep_copies=False,
    )
    wait_for_run_end(run, 120)
    body = run_as_the_api_says(coordinator, run)
    errors = list(RunFile.objects.filter(run=run).values_list("error", flat=True))
    assert body["state"] == "finished", (body["message"], errors)
    assert body["progress"]["files_done"] == 4
    assert body["credential"] == "token"
    run_directory = scope_path(RunFile.objects.filter(run=run).first().destination_url.rsplit("/", 1)[0])
    assert sorted((row["audience"], tuple(row["scopes"])) for row in body["credential_scopes"]) == sorted(
        [
            (audience_of(bed.url(source)), ("storage.read:/data/portal-testfiles",)),
            (audience_of(bed.url(destination)), (f"storage.create:{run_directory}", f"storage.read:{run_directory}")),
        ]
    )
    assert TransferRecord.objects.filter(run=run, state="ok").count() == 4
    # Its copies are deleted with a storage.modify token of their directory (keep_copies off).
    wait_for(lambda: Run.objects.get(pk=run.pk).copies in ("deleted", "delete-failed"), 60, "the clean-up")
    run.refresh_from_db()
    assert run.copies == "deleted", run.copies_message
    site = bed.site_dir(destination.split(".")[0])
    assert not list(site.glob(f"**/portal-runs/{run.directory}/*"))
    assert set(TransferRecord.objects.filter(run=run).values_list("mode", flat=True)) == {mode}
    # No token in what the portal keeps: not in the run, its files, its records.
    with connection.cursor() as cursor:
        for table in ("runs_run", "runs_runfile", "results_transferrecord"):
            cursor.execute(f"SELECT row_to_json(t)::text FROM {table} t")
            kept = " ".join(row[0] for row in cursor.fetchall())
            assert "eyJ" not in kept, table


def test_a_recall_through_tape_rest_started_through_the_api_stages_with_a_stage_token(
    token_registry: Testbed, token_worker: Path, coordinator: Any
) -> None:
    bed = token_registry
    directory = f"token-recall-{uuid.uuid4().hex[:8]}"
    for index in range(3):
        bed.tape_put(f"{directory}/file-{index}", os.urandom(300_000))
    urls = [bed.url("tape.rest", f"{directory}/file-{index}") for index in range(3)]
    client = APIClient()
    client.force_authenticate(coordinator)
    parameters = {"urls": urls, "poll_interval": 0.5, "timeout": 60}
    response = client.post("/api/v1/runs/", {"kind": "staging", "parameters": parameters}, format="json")
    assert response.status_code == 201, response.content
    run = Run.objects.get(pk=response.json()["id"])
    wait_for_run_end(run, 90)
    body = run_as_the_api_says(coordinator, run)
    assert body["state"] == "finished", body["message"]
    assert (body["credential"], body["credential_scopes"]) == (
        "token",
        [
            {
                "audience": audience_of(urls[0]),
                "scopes": [f"storage.read:/data/{directory}", f"storage.stage:/data/{directory}"],
            }
        ],
    )
    run.refresh_from_db()
    assert run.summary["staged"] == 3
    assert run.summary["files_from_tape"] == 3


def test_an_issuer_that_refuses_the_client_fails_the_run_before_its_first_copy(
    token_registry: Testbed, coordinator: Any, tmp_path: Path
) -> None:
    bed = token_registry
    client_id, _ = bed.client_credentials()
    env = token_worker_env(
        bed,
        TOKEN_SOURCE="client-credentials",
        TOKEN_ISSUER=bed.issuer_url,
        TOKEN_CLIENT_ID=client_id,
        TOKEN_CLIENT_SECRET="not-the-secret",
        TOKEN_CA_DIR=str(bed.pki.cert_dir),
    )
    purge_default_queue()
    served_queues_forget()
    pidfile = start_worker(tmp_path, "w-refused", concurrency=4, env=env)
    try:
        run = start_through_api(
            coordinator, source=bed.url("t0.https"), destinations=[bed.url("t1a.https")], file_count=2, file_size=MB
        )
        wait_for_run_end(run, 60)
    finally:
        processes.stop(pidfile)
        served_queues_forget()
    run.refresh_from_db()
    assert run.state == "failed"
    assert run.message.startswith(
        f"no token for the run's storage: the token issuer {bed.issuer_url} refused: HTTP 401 invalid_client"
    ), run.message
    assert not RunFile.objects.filter(run=run).exclude(start=None).exists()  # no copy began
    assert json.dumps(run.credential_detail) == "{}"
