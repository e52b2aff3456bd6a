"""The site's gfal2 contexts: its own credentials, from the agent's configuration (never the portal's)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from measure.context import ProbeContext, gfal2_context_new
from measure.tokens import TokenFile

from .config import Credentials


def credentials_apply(credentials: Credentials) -> None:
    """Where gfal2 and XRootD find the X.509 proxy and CAs: the agent's own process environment."""
    if credentials.x509_cert_dir:
        os.environ["X509_CERT_DIR"] = credentials.x509_cert_dir
    if credentials.x509_proxy:
        os.environ["X509_USER_PROXY"] = credentials.x509_proxy


class AgentProbeContext(ProbeContext):
    """ProbeContext with the site's credentials: a token file (WLCG tokens per URL, measure.tokens) when one is
    configured, else the X.509 proxy as gfal2 finds it; and a fixed bearer token for some prefixes (a testbed's)."""

    def __init__(self, credentials: Credentials) -> None:
        self.credentials = credentials
        if credentials.token_file:
            self.token_source = TokenFile(credentials.token_file)

    def gfal2_context(self, grants: Sequence[tuple[str, str]] = ()) -> Any:
        if self.token_source.kind == "token":
            return self.with_tokens(gfal2_context_new(), grants)
        context = gfal2_context_new()
        if self.credentials.bearer_token and self.credentials.bearer_prefixes:
            context.set_opt_boolean("HTTP PLUGIN", "RETRIEVE_BEARER_TOKEN", False)
            for prefix in self.credentials.bearer_prefixes:
                context.cred_set(prefix, context.cred_new("BEARER", self.credentials.bearer_token))
        return context
