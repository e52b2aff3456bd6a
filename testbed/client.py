"""gfal2 set up to talk to the testbed: its CA, and a bearer token for HTTP third-party copy (any value when the
testbed checks none; with TESTBED_TOKENS=required, real tokens from the testbed's issuer, per URL)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from typing import Any

from measure.context import ProbeContext, gfal2_context_new
from measure.tokens import ClientCredentials, client_credentials

from .grid import Testbed, TestbedConfig


def gfal2_context(testbed: Testbed) -> Any:
    """A gfal2 context that trusts the testbed CA and sends a bearer token to its davs:// endpoints.

    XrdHttpTPC rejects the `Credential: gridsite` header gfal2 sends without a token; the testbed checks no
    tokens, so any bearer credential per URL prefix makes HTTP third-party copy work.
    """
    os.environ.update({"X509_CERT_DIR": str(testbed.pki.cert_dir)})
    context = gfal2_context_new()
    context.set_opt_boolean("HTTP PLUGIN", "RETRIEVE_BEARER_TOKEN", False)
    for prefix in testbed.https_prefixes():
        context.cred_set(prefix, context.cred_new("BEARER", testbed.config.bearer_token))
    return context


def testbed_token_source(testbed: Testbed) -> ClientCredentials:
    """The client-credentials grant against the testbed's own issuer (its one client), shared by the process."""
    client_id, secret = testbed.client_credentials()
    return client_credentials(testbed.issuer_url, client_id, secret, ca_dir=str(testbed.pki.cert_dir))


class TestbedProbeContext(ProbeContext):
    """The probe context of workers that test against the local testbed (settings.PROBE_CONTEXT names it when
    PROBES_TESTBED is on): its CA and bearer token, and its XCache, which it can empty."""

    def __init__(self) -> None:
        self.testbed = Testbed(TestbedConfig.from_settings())
        if self.testbed.tokens_required:
            self.token_source = testbed_token_source(self.testbed)

    def gfal2_context(self, grants: Sequence[tuple[str, str]] = ()) -> Any:
        if self.token_source.kind == "token":
            os.environ.update({"X509_CERT_DIR": str(self.testbed.pki.cert_dir)})
            return self.with_tokens(gfal2_context_new(), grants)
        return gfal2_context(self.testbed)

    def free_space(self, url: str) -> int | None:
        """The testbed's servers all write under its directory: the free space of that disk."""
        if any(url.startswith(endpoint.url.rstrip("/")) for endpoint in self.testbed.endpoints()):
            return shutil.disk_usage(self.testbed.config.directory).free
        return super().free_space(url)

    def cache_flush(self, cache_url: str) -> None:
        if self.testbed.endpoint("xcache.root").url.split("//")[1] == cache_url.split("//")[1]:
            self.testbed.cache_flush()
            return
        super().cache_flush(cache_url)

    def tape_mounts(self, url: str) -> int | None:
        """The emulated tape's mounts so far (all drives), from its status; None for anything else."""
        tape = [self.testbed.endpoint(name).url.rstrip("/") for name in ("tape.root", "tape.rest")]
        if not any(url.startswith(base) for base in tape):
            return super().tape_mounts(url)
        try:
            status = self.testbed.tape_rest_status()
        except OSError:
            return None
        return sum(int(drive.get("mounts", 0)) for drive in status.get("drives", []))
