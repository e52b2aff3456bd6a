"""The Tape REST door's token check (the tape daemon's --token-issuer): a WLCG JWT of the issuer, for this door as
audience, whose scopes cover the paths asked. The issuer's keys come from its OpenID configuration over HTTPS.

Scopes, after the WLCG JWT profile: a stage request, its polls, cancels and releases need storage.stage; archive
information, file reads and listings need storage.read (storage.stage reads too). A scope's path covers itself and
everything below it.
"""

from __future__ import annotations

import json
import posixpath
import ssl
import threading
import urllib.request
from http import HTTPStatus
from typing import Any

import jwt

from .model import TapeError


class TokenPolicy:
    """Checks the Authorization header of a request against the issuer's keys, this door's audience and scopes."""

    def __init__(self, issuer: str, audience: str, ca_dir: str | None) -> None:
        self.issuer, self.audience = issuer.rstrip("/"), audience
        self.ssl = ssl.create_default_context(capath=ca_dir) if ca_dir else ssl.create_default_context()
        self._keys: jwt.PyJWKClient | None = None
        self._lock = threading.Lock()

    def _key_client(self) -> jwt.PyJWKClient:
        with self._lock:
            if self._keys is None:
                url = f"{self.issuer}/.well-known/openid-configuration"
                with urllib.request.urlopen(url, timeout=10, context=self.ssl) as response:
                    jwks_uri = json.load(response)["jwks_uri"]
                self._keys = jwt.PyJWKClient(jwks_uri, ssl_context=self.ssl)
            return self._keys

    def claims(self, header: str | None) -> dict[str, Any]:
        """The verified claims of the request's bearer token; 401 without a valid one."""
        if not header or not header.lower().startswith("bearer "):
            raise TapeError(HTTPStatus.UNAUTHORIZED, "a bearer token is required")
        token = header[7:].strip()
        try:
            key = self._key_client().get_signing_key_from_jwt(token)
            claims: dict[str, Any] = jwt.decode(
                token, key.key, algorithms=["RS256", "ES256"], issuer=self.issuer, audience=self.audience
            )
        except (jwt.InvalidTokenError, jwt.PyJWKClientError, OSError, KeyError, ValueError) as exc:
            raise TapeError(HTTPStatus.UNAUTHORIZED, f"invalid token: {exc}") from exc
        return claims

    def require(self, header: str | None, operations: tuple[str, ...], paths: list[str]) -> None:
        """403 unless the token holds, for every path, a scope of one of `operations` (e.g. "storage.stage")
        covering it."""
        scopes = str(self.claims(header).get("scope", "")).split()
        for path in paths:
            if not any(_covers(scope, operation, path) for scope in scopes for operation in operations):
                wanted = " or ".join(f"{operation}:{path}" for operation in operations)
                raise TapeError(HTTPStatus.FORBIDDEN, f"the token does not allow this: it lacks {wanted}")


def _covers(scope: str, operation: str, path: str) -> bool:
    name, _, allowed = scope.partition(":")
    if name != operation or not allowed.startswith("/"):
        return False
    allowed = posixpath.normpath(allowed)
    path = posixpath.normpath(path)
    return allowed in ("/", path) or path.startswith(allowed + "/")
