"""gfal2 contexts that leave the caller's signals alone. Plain Python, no Django.

`gfal2.creat_context()` blocks almost every signal in the calling thread while it loads its plugins (measured on
Debian 12, gfal2 2.21.3: the thread's blocked mask goes from 0 to fffffffe3ff9ea07, SIGTERM, SIGINT and SIGUSR1
included) and never unblocks them. A process whose main thread made a context then ignores SIGTERM, and every
subprocess it starts inherits the mask: a `manage.py consume` started after a run would not stop on SIGTERM,
nor a gunicorn worker that started a run. Every context of the portal is made here, and the mask is put back.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Sequence
from typing import Any

import gfal2

from .tokens import HostCredentials, TokenContext, TokenSource, grants_requests

# XRootD's client retries a connection XRD_CONNECTIONRETRY times (default 5), XRD_CONNECTIONWINDOW seconds apart
# (default 120): a run whose root:// endpoint refused connections retried for minutes before it said why (measured
# here: a stat of root://127.0.0.1:1 still hung after 300 s). Two tries 10 s apart fail in 10.0 s with XRootD's
# "Connection refused". Set before the first context loads the xrootd plugin; the environment overrides them.
XROOTD_CLIENT_DEFAULTS = {"XRD_CONNECTIONRETRY": "2", "XRD_CONNECTIONWINDOW": "10"}
for _name, _value in XROOTD_CLIENT_DEFAULTS.items():
    os.environ.setdefault(_name, _value)


def gfal2_context_new() -> Any:
    """A new gfal2 context; the calling thread's signal mask is the same after as before."""
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, [])  # read it
    try:
        return gfal2.creat_context()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)


class ProbeContext:
    """What a worker's probes need from the place they run: gfal2 contexts with that place's credentials and
    options, and the hooks only some deployments have (emptying a cache). A deployment names its class in
    settings.PROBE_CONTEXT; this one is plain gfal2 with the host's grid credentials (X509_*), unless the settings
    give it a token source (runs.credentials)."""

    _token_source: TokenSource | None = None

    @property
    def token_source(self) -> TokenSource:
        """Where this context's tokens come from: the host's credentials unless a deployment gives another."""
        if self._token_source is None:
            self._token_source = HostCredentials(dict(os.environ))
        return self._token_source

    @token_source.setter
    def token_source(self, source: TokenSource) -> None:
        self._token_source = source

    def gfal2_context(self, grants: Sequence[tuple[str, str]] = ()) -> Any:
        """A new gfal2 context for one probe or copy. `grants`: (url, access) pairs ("read", "write", "overwrite",
        "delete", "stage"; a URL ending in "/" is a directory) for which a token source gives each URL its own token
        (raises measure.tokens.TokenError when it cannot)."""
        return self.with_tokens(gfal2_context_new(), grants)

    def with_tokens(self, ctx: Any, grants: Sequence[tuple[str, str]]) -> Any:
        """ctx, wrapped so that each URL of `grants` carries its token, when the token source gives tokens."""
        if self.token_source.kind != "token" or not grants:
            return ctx
        return TokenContext(ctx, self.token_source, grants)

    def credential(self, grants: Sequence[tuple[str, str]]) -> dict[str, Any]:
        """What a run uses, for its page (never a token): the kind ("token", "x509", "none"), the source, and for
        tokens the audience and scopes asked for each grant, each obtained now so that an issuer that cannot be
        reached or refuses the client fails the run before its first copy (TokenError, with the issuer's answer)."""
        described = self.token_source.describe()
        if self.token_source.kind != "token":
            return described
        requests = [request for _, _, request in grants_requests(grants)]
        for request in requests:
            self.token_source.token(request)
        return {**described, "requests": [request.to_dict() for request in requests]}

    def cache_flush(self, cache_url: str) -> None:
        """Empty the cache at cache_url before a cache study's cache-empty reads."""
        raise RuntimeError(f"cannot empty the cache at {cache_url}: this deployment has no way to flush it")

    def free_space(self, url: str) -> int | None:
        """Bytes free where url's endpoint writes, when it tells: gfal2's space-token attribute (WebDAV quota,
        XRootD space information) as JSON with "unusedsize"; None when the endpoint does not say."""
        try:
            raw = self.gfal2_context().getxattr(url.rstrip("/") + "/", "spacetoken")
            entries = json.loads(raw)
        except Exception:  # gfal2.GError, or an answer that is not JSON: the endpoint does not say
            return None
        entries = entries if isinstance(entries, list) else [entries]
        free = [int(entry["unusedsize"]) for entry in entries if isinstance(entry, dict) and "unusedsize" in entry]
        return min(free) if free else None

    def tape_mounts(self, url: str) -> int | None:
        """Mounts the tape system behind url has made so far, where the deployment can see them (no tape API tells a
        client its mounts): a recall's mounts are the difference before and after it. None: not known here."""
        return None
