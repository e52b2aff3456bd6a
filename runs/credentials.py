"""What a run presents to storage: the deployment's token source (settings), the grants each step of a run asks
for (least privilege per URL), and the note the run keeps of it (the kind, the source, the audiences and scopes
asked; never a token)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from django.conf import settings

from measure.context import ProbeContext
from measure.testfiles import DIRECTORY as TESTFILES_DIRECTORY
from measure.tokens import TokenFile, TokenSource, client_credentials

from .kinds.base import Grants
from .kinds.registry import kind_for
from .kinds.transfer import copy_grants
from .models import Run

__all__ = [
    "Grants",
    "copy_grants",
    "delete_grants",
    "run_credential_check",
    "run_credential_store",
    "run_grants",
    "test_file_grants",
    "token_source_from_settings",
]


def token_source_from_settings() -> TokenSource | None:
    """The token source settings.TOKEN_SOURCE names; None: the probe context keeps its own (the host's X.509, or
    the testbed's issuer when it requires tokens)."""
    name = settings.TOKEN_SOURCE
    if name == "client-credentials":
        return client_credentials(
            settings.TOKEN_ISSUER,
            settings.TOKEN_CLIENT_ID,
            settings.TOKEN_CLIENT_SECRET,
            token_endpoint=settings.TOKEN_ENDPOINT,
            ca_dir=settings.TOKEN_CA_DIR or os.environ.get("X509_CERT_DIR", ""),
        )
    if name == "file":
        return TokenFile(settings.BEARER_TOKEN_FILE)
    if name == "x509":
        source = TokenSource()
        source.kind = source.name = "x509"
        return source
    return None


def test_file_grants(base_url: str) -> Grants:
    """Making a test file: uploaded under a temporary name, renamed into place, a stale one deleted."""
    return [(f"{base_url.rstrip('/')}/{TESTFILES_DIRECTORY}/", "overwrite")]


def delete_grants(urls: Iterable[str], directories: Iterable[str]) -> Grants:
    return [(url, "delete") for url in urls] + [(directory.rstrip("/") + "/", "delete") for directory in directories]


def run_grants(run: Run) -> Grants:
    """Every grant the run's steps will ask for (its kind's, runs.kinds), so that its tokens are obtained (and an
    issuer's refusal seen) before its first copy."""
    kind = kind_for(run.kind)
    return kind.grants(run) if kind is not None else []


def run_credential_store(run_id: int, detail: dict[str, Any]) -> None:
    """Keep what the run presents to storage on its row (the run page and API show it)."""
    Run.objects.filter(pk=run_id).update(credential=str(detail.get("kind", "")), credential_detail=detail)


def run_credential_check(run: Run, context: ProbeContext) -> dict[str, Any]:
    """Obtain the run's tokens now (raises measure.tokens.TokenError with the issuer's answer) and keep the
    note of them on the run."""
    detail = context.credential(run_grants(run))
    run_credential_store(run.pk, detail)
    return detail
