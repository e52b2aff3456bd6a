"""gfal2 set up to talk to the testbed: its CA, and a bearer token for HTTP third-party copy."""

from __future__ import annotations

import os
from typing import Any

from .grid import Testbed


def gfal2_context(testbed: Testbed) -> Any:
    """A gfal2 context that trusts the testbed CA and sends a bearer token to its davs:// endpoints.

    XrdHttpTPC rejects the `Credential: gridsite` header gfal2 sends without a token; the testbed checks no
    tokens, so any bearer credential per URL prefix makes HTTP third-party copy work.
    """
    from challenges.probes.context import gfal2_context_new

    os.environ.update({"X509_CERT_DIR": str(testbed.pki.cert_dir)})
    context = gfal2_context_new()
    context.set_opt_boolean("HTTP PLUGIN", "RETRIEVE_BEARER_TOKEN", False)
    for prefix in testbed.https_prefixes():
        context.cred_set(prefix, context.cred_new("BEARER", testbed.config.bearer_token))
    return context
