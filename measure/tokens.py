"""WLCG tokens for the probes: where a worker gets them, which scopes each URL needs, and gfal2 contexts that hand
each URL its own token. Plain Python, no Django.

One token source per deployment (settings pick it, runs.credentials builds it):
- :class:`ClientCredentials`: the OAuth2 client-credentials grant against an IAM-compatible token endpoint, one
  token per (audience, scopes), cached until shortly before it expires (then asked again: long runs refresh);
- :class:`TokenFile`: a file kept fresh by oidc-agent or htgettoken (BEARER_TOKEN_FILE), read at every use;
- :class:`HostCredentials`: no token from the portal; gfal2 uses what the host holds (X509_USER_PROXY, ...).

Least privilege, per URL and what is done there (:func:`token_request`): a source is read (storage.read), a
destination is stat'ed, written and checksummed (storage.read + storage.create, + storage.modify where it is
overwritten or deleted), a recall stages (storage.stage); each scope names the file's directory, the audience is
the storage door (https://HOST:PORT for davs://, root://HOST:PORT for root://).

:class:`TokenContext` wraps a gfal2 context: davs:// URLs get a BEARER credential per URL prefix
(`Context.cred_set`, which gfal2 also hands to the active side of an HTTP third-party copy as
TransferHeaderAuthorization), root:// URLs carry theirs in the `authz` CGI (gfal2 2.21's xrootd plugin has no
token of its own). Tokens never leave this module in a message: every gfal2 error is redacted.
"""

from __future__ import annotations

import base64
import binascii
import errno
import json
import logging
import posixpath
import re
import ssl
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import gfal2

HTTP_SCHEMES = ("http", "https", "dav", "davs")
ROOT_SCHEMES = ("root", "xroot", "roots", "xroots")
# What each access needs of the storage, after the WLCG JWT profile.
ACCESS_SCOPES = {
    "read": ("storage.read",),
    "write": ("storage.read", "storage.create"),
    "overwrite": ("storage.read", "storage.create", "storage.modify"),
    "delete": ("storage.read", "storage.modify"),
    "stage": ("storage.read", "storage.stage"),
}
_SECRET = re.compile(r"(authz=)[^&\s'\"]+|(Bearer(?:%20|\s)+)[A-Za-z0-9._~+/=%-]+", re.IGNORECASE)


class TokenError(RuntimeError):
    """The token source could not give a token (the issuer unreachable or refusing the client, no token file)."""


@dataclass(frozen=True)
class TokenRequest:
    """What a token is asked for: the storage door as audience, and the scopes."""

    audience: str
    scopes: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"audience": self.audience, "scopes": list(self.scopes)}


def token_redacted(text: str) -> str:
    """text without any token in it (an authz CGI value, a Bearer value)."""
    return _SECRET.sub(lambda match: (match.group(1) or match.group(2)) + "<token>", text)


class TokenRedactingFilter(logging.Filter):
    """A logging filter that takes tokens out of every record (gfal2 logs Davix's request headers at INFO, the
    Authorization header among them; a root:// URL carries its token in the authz CGI)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        redacted = token_redacted(message)
        if redacted != message:
            record.msg, record.args = redacted, None
        return True


def audience_of(url: str) -> str:
    """The storage door a URL goes to, as WLCG tokens name it: https://HOST:PORT for HTTP, root://HOST:PORT."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    scheme = "https" if scheme in HTTP_SCHEMES else "root" if scheme in ROOT_SCHEMES else scheme
    return f"{scheme}://{parts.netloc}"


def scope_path(url: str) -> str:
    """The path a scope names for url: the URL's path, normalised (root://h//data/x -> /data/x)."""
    path = posixpath.normpath("/" + urlsplit(url).path.lstrip("/"))
    return "/" if path in (".", "//") else path


def grant_prefix(url: str, *, directory: bool = False) -> str:
    """The URL prefix a grant covers: the file's directory (or the directory itself), without a trailing slash."""
    parts = urlsplit(url)
    path = parts.path.rstrip("/")
    if not directory:
        path = path.rsplit("/", 1)[0]
    return f"{parts.scheme}://{parts.netloc}{path}"


def token_request(url: str, access: str, *, directory: bool = False) -> TokenRequest:
    """The least privilege for `access` ("read", "write", "overwrite", "delete", "stage") on url: the scopes on
    the file's directory (on url itself with directory=True), the door as audience."""
    if access not in ACCESS_SCOPES:
        raise ValueError(f"access must be one of {', '.join(ACCESS_SCOPES)}, not {access!r}")
    path = scope_path(grant_prefix(url, directory=directory))
    return TokenRequest(audience_of(url), tuple(f"{scope}:{path}" for scope in ACCESS_SCOPES[access]))


class TokenSource:
    """Where tokens come from; this one gives none (the host's credentials, X.509, are used as they are)."""

    kind = "none"
    name = "none"

    def token(self, request: TokenRequest) -> str | None:
        return None

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "source": self.name}


class HostCredentials(TokenSource):
    """The host's own grid credentials: X.509 when X509_USER_PROXY or X509_USER_CERT is set, else none."""

    def __init__(self, environ: dict[str, str]) -> None:
        x509 = environ.get("X509_USER_PROXY") or environ.get("X509_USER_CERT")
        self.kind = self.name = "x509" if x509 else "none"


class ClientCredentials(TokenSource):
    """The OAuth2 client-credentials grant: one token per (audience, scopes), kept until `margin` seconds before it
    expires. Thread-safe: a worker's copies share it."""

    kind = "token"
    name = "client-credentials"

    def __init__(
        self, issuer: str, client_id: str, client_secret: str, *, token_endpoint: str = "", ca_dir: str = ""
    ) -> None:
        self.issuer, self.client_id, self.client_secret = issuer.rstrip("/"), client_id, client_secret
        self._endpoint = token_endpoint
        self.ssl = ssl.create_default_context(capath=ca_dir) if ca_dir else ssl.create_default_context()
        self._cache: dict[TokenRequest, tuple[str, float, float]] = {}
        self._lock = threading.Lock()

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "source": self.name, "issuer": self.issuer, "client_id": self.client_id}

    def token_endpoint(self) -> str:
        if not self._endpoint:
            document = self._call(urllib.request.Request(f"{self.issuer}/.well-known/openid-configuration"))
            self._endpoint = str(document.get("token_endpoint") or "")
            if not self._endpoint:
                raise TokenError(f"the token issuer {self.issuer} names no token_endpoint in its OpenID configuration")
        return self._endpoint

    def _call(self, request: urllib.request.Request) -> dict[str, Any]:
        try:
            with urllib.request.urlopen(request, timeout=20, context=self.ssl) as response:
                answer: dict[str, Any] = json.load(response)
                return answer
        except urllib.error.HTTPError as exc:
            body = exc.read(2000).decode(errors="replace")
            try:
                document = json.loads(body)
                said = f"{document.get('error', '')}: {document.get('error_description', '')}".strip(": ")
            except ValueError:
                said = body.strip()[:300]
            raise TokenError(f"the token issuer {self.issuer} refused: HTTP {exc.code} {said}") from exc
        except (urllib.error.URLError, OSError, ValueError) as exc:
            reason = getattr(exc, "reason", exc)
            raise TokenError(f"the token issuer {self.issuer} cannot be reached: {reason}") from exc

    def token(self, request: TokenRequest) -> str:
        with self._lock:
            cached = self._cache.get(request)
            now = time.time()
            if cached is not None and now < cached[1] - cached[2]:
                return cached[0]
            form = {"grant_type": "client_credentials", "scope": " ".join(request.scopes)}
            form["audience"] = request.audience
            credentials = base64.b64encode(f"{self.client_id}:{self.client_secret}".encode()).decode()
            http = urllib.request.Request(
                self.token_endpoint(),
                data=urllib.parse.urlencode(form).encode(),
                headers={"Authorization": f"Basic {credentials}", "Accept": "application/json"},
            )
            answer = self._call(http)
            token = str(answer.get("access_token") or "")
            if not token:
                raise TokenError(f"the token issuer {self.issuer} answered without an access_token")
            lifetime = float(answer.get("expires_in") or _lifetime(token) or 300)
            # Asked again once less than a fifth of its life (at most 5 minutes, at least 10 s) is left.
            self._cache[request] = (token, now + lifetime, min(300.0, max(10.0, lifetime / 5)))
            return token


_SHARED: dict[tuple[str, ...], ClientCredentials] = {}
_SHARED_LOCK = threading.Lock()


def client_credentials(
    issuer: str, client_id: str, client_secret: str, *, token_endpoint: str = "", ca_dir: str = ""
) -> ClientCredentials:
    """The process's one ClientCredentials of this issuer and client: its tokens are cached across the contexts
    (and the copies) of a worker."""
    key = (issuer, client_id, client_secret, token_endpoint, ca_dir)
    with _SHARED_LOCK:
        if key not in _SHARED:
            _SHARED[key] = ClientCredentials(
                issuer, client_id, client_secret, token_endpoint=token_endpoint, ca_dir=ca_dir
            )
        return _SHARED[key]


class TokenFile(TokenSource):
    """A token file that oidc-agent or htgettoken keeps fresh (BEARER_TOKEN_FILE), read at every use: it holds
    whatever scopes and audience its owner asked for, the same for every URL."""

    kind = "token"
    name = "file"

    def __init__(self, path: str) -> None:
        self.path = Path(path)

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "source": self.name, "path": str(self.path)}

    def token(self, request: TokenRequest) -> str:
        try:
            token = self.path.read_text().strip()
        except OSError as exc:
            raise TokenError(f"the token file {self.path} cannot be read: {exc.strerror or exc}") from exc
        if not token:
            raise TokenError(f"the token file {self.path} is empty")
        return token


def _lifetime(token: str) -> float | None:
    """Seconds left of a JWT by its exp claim (unverified: only to know when to ask again)."""
    try:
        payload = token.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        return float(claims["exp"]) - time.time()
    except (IndexError, ValueError, KeyError, TypeError, binascii.Error):
        return None


@dataclass
class _Grant:
    prefix: str
    access: str
    request: TokenRequest
    token: str


def grants_requests(grants: Iterable[tuple[str, str]]) -> list[tuple[str, str, TokenRequest]]:
    """(prefix, access, request) for each (url, access): a URL ending in "/" is a directory; two grants of one
    prefix are merged into one request holding both scope sets."""
    merged: dict[str, tuple[str, set[str], str]] = {}
    for url, access in grants:
        directory = url.endswith("/")
        request = token_request(url, access, directory=directory)
        prefix = grant_prefix(url, directory=directory)
        if prefix in merged:
            merged[prefix][1].update(request.scopes)
        else:
            merged[prefix] = (access, set(request.scopes), request.audience)
    return [
        (prefix, access, TokenRequest(audience, tuple(sorted(scopes))))
        for prefix, (access, scopes, audience) in merged.items()
    ]


class TokenContext:
    """A gfal2 context whose URLs each carry their own token (see the module's docstring); everything else is
    the wrapped context's. Errors are redacted, and a refusal says which scope was needed and what was asked."""

    # The methods of one URL, and the scope each needs there.
    _URL_METHODS = {name: "storage.read" for name in ("stat", "lstat", "listdir", "checksum", "getxattr", "open")}
    _URL_METHODS |= {"unlink": "storage.modify", "rmdir": "storage.modify"}
    _URL_METHODS |= {"mkdir": "storage.create", "mkdir_rec": "storage.create"}

    def __init__(self, ctx: Any, source: TokenSource, grants: Sequence[tuple[str, str]]) -> None:
        self._ctx, self.source = ctx, source
        self._grants: list[_Grant] = []
        for prefix, access, request in grants_requests(grants):
            token = source.token(request)
            if token is None:
                continue
            self._grants.append(_Grant(prefix, access, request, token))
            parts = urlsplit(prefix)
            if parts.scheme.lower() in HTTP_SCHEMES:
                ctx.cred_set(prefix, ctx.cred_new("BEARER", token))
                if access == "stage":
                    # gfal2 looks the Tape REST API's own URLs up (https://HOST:PORT/api/...), not the files'.
                    ctx.cred_set(f"https://{parts.netloc}/", ctx.cred_new("BEARER", token))
        self._grants.sort(key=lambda grant: len(grant.prefix), reverse=True)
        ctx.set_opt_boolean("HTTP PLUGIN", "RETRIEVE_BEARER_TOKEN", False)

    @property
    def requests(self) -> list[TokenRequest]:
        return [grant.request for grant in self._grants]

    def _grant(self, url: str) -> _Grant | None:
        for grant in self._grants:
            if url == grant.prefix or url.startswith(grant.prefix + "/"):
                return grant
        return None

    def url(self, url: str) -> str:
        """url as gfal2 gets it: a root:// URL with its token in the authz CGI; others as they are."""
        grant = self._grant(url)
        if grant is None or urlsplit(url).scheme.lower() not in ROOT_SCHEMES:
            return url
        value = urllib.parse.quote(f"Bearer {grant.token}", safe="")
        return f"{url}{'&' if '?' in url else '?'}authz={value}"

    def checksums_in_copy(self, source: str, destination: str) -> bool:
        """False when a root:// URL of the copy carries a token: XrdCl (5.5) drops the authz CGI from the checksum
        queries of its copy (refused as "Unable to checksum ...; permission denied"), so the caller compares."""
        return not any(
            urlsplit(url).scheme.lower() in ROOT_SCHEMES and self._grant(url) is not None
            for url in (source, destination)
        )

    def bearer_for(self, url: str) -> str | None:
        """The token url's grant holds (for HTTP calls made beside gfal2, such as Tape REST polls)."""
        grant = self._grant(url)
        return grant.token if grant is not None else None

    def refused(self, exc: Exception, urls: Sequence[str], needs: Sequence[str]) -> gfal2.GError:
        """gfal2's error without tokens, and for a refusal (401/403, EACCES/EPERM) the scope the storage wanted:
        `needs` holds, per URL, the scope its operation needs (a copy's source storage.read, its destination
        storage.create)."""
        message = token_redacted(str(getattr(exc, "message", "") or exc))
        code = int(getattr(exc, "code", 0) or 0)
        lowered = message.lower()
        refused = code in (errno.EACCES, errno.EPERM) or any(word in lowered for word in (" 401", " 403"))
        sides = [(url, need, self._grant(url)) for url, need in zip(urls, needs, strict=True)]
        sides = [(url, need, grant) for url, need, grant in sides if grant is not None]
        if refused and sides:
            # A copy's failing side is named by gfal2 ("source" / "destination"); else the last URL.
            _, need, grant = sides[0] if re.search(r"\bsource\b", lowered) and len(sides) > 1 else sides[-1]
            assert grant is not None
            needed = f"{need}:{scope_path(grant.prefix)}"
            asked = f"{' '.join(grant.request.scopes)} for {grant.request.audience}"
            message = f"the storage refused the token: it lacks {needed} (asked: {asked}): {message}"
        return gfal2.GError(message, code)

    def _call(self, method: Callable[..., Any], urls: Sequence[str], needs: Sequence[str], *args: Any) -> Any:
        try:
            return method(*args)
        except gfal2.GError as exc:
            raise self.refused(exc, urls, needs) from None

    def filecopy(self, params: Any, source: str, destination: str) -> Any:
        return self._call(
            self._ctx.filecopy,
            [source, destination],
            ["storage.read", "storage.create"],
            params,
            self.url(source),
            self.url(destination),
        )

    def rename(self, old: str, new: str) -> Any:
        return self._call(self._ctx.rename, [old, new], ["storage.modify"] * 2, self.url(old), self.url(new))

    def _errors(self, errors: Any, urls: Sequence[str]) -> Any:
        """A bulk call's per-file errors (GError or None), redacted like the rest."""
        if not isinstance(errors, list):
            return errors
        return [
            error if error is None else self.refused(error, [url], ["storage.stage"])
            for error, url in zip(errors, urls, strict=False)
        ]

    def bring_online(self, urls: list[str], *args: Any) -> Any:
        stage = ["storage.stage"] * len(urls)
        errors, token = self._call(self._ctx.bring_online, urls, stage, [self.url(url) for url in urls], *args)
        return self._errors(errors, urls), token

    def bring_online_poll(self, urls: list[str], *args: Any) -> Any:
        stage = ["storage.stage"] * len(urls)
        errors = self._call(self._ctx.bring_online_poll, urls, stage, [self.url(url) for url in urls], *args)
        return self._errors(errors, urls)

    def abort_bring_online(self, urls: list[str], *args: Any) -> Any:
        stage = ["storage.stage"] * len(urls)
        errors = self._call(self._ctx.abort_bring_online, urls, stage, [self.url(url) for url in urls], *args)
        return self._errors(errors, urls)

    def release(self, url: str, *args: Any) -> Any:
        return self._call(self._ctx.release, [url], ["storage.stage"], self.url(url), *args)

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._ctx, name)
        if name not in self._URL_METHODS:
            return attribute

        need = self._URL_METHODS[name]

        def with_token(url: str, *args: Any) -> Any:
            return self._call(attribute, [url], [need], self.url(url), *args)

        return with_token


__all__ = [
    "ClientCredentials",
    "HostCredentials",
    "TokenContext",
    "TokenError",
    "TokenFile",
    "TokenRequest",
    "TokenSource",
    "audience_of",
    "client_credentials",
    "grants_requests",
    "scope_path",
    "token_redacted",
    "token_request",
]
