"""The testbed's token issuer: WLCG JWTs signed with a key of the testbed's PKI, as INDIGO IAM issues them.

`python -m testbed.issuer --root DIR --port N --cert C --key K` serves over HTTPS (the testbed's host certificate,
so the XRootD token plugin fetches the keys the real way, trusting the testbed CA):
- `/.well-known/openid-configuration`: issuer, jwks_uri, token_endpoint;
- `/jwks`: the public key;
- `POST /token`: the OAuth2 client-credentials grant (client id and secret by HTTP Basic or in the form), with
  `scope` (space-separated WLCG scopes: storage.read:/path, storage.create:/path, storage.modify:/path,
  storage.stage:/path) and `audience`; answers `{"access_token", "token_type": "Bearer", "expires_in", "scope"}`
  or an OAuth2 error (`invalid_client` 401, `invalid_scope` / `unsupported_grant_type` 400).

Plain Python (PyJWT and cryptography): tests mint tokens of any scope with :func:`token_mint` directly.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import contextlib
import json
import secrets
import ssl
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

KEY_ID = "testbed-issuer-1"
CLIENT_ID = "portal"
LIFETIME = 1200  # seconds: IAM's default access token lifetime is of this order (DC24: 20 minutes to an hour)
SCOPE_PREFIXES = ("storage.read:", "storage.create:", "storage.modify:", "storage.stage:")
PLAIN_SCOPES = ("openid", "wlcg", "wlcg.groups", "offline_access")


@dataclass(frozen=True)
class IssuerFiles:
    """Where the issuer keeps its signing key and its one client's secret (under the testbed's pki/issuer/)."""

    root: Path

    @property
    def key(self) -> Path:
        return self.root / "issuer.key"

    @property
    def client_secret(self) -> Path:
        return self.root / "client-secret"


def issuer_files_ensure(root: Path) -> IssuerFiles:
    """Make the signing key (RSA 2048) and the client secret once; later calls reuse them."""
    files = IssuerFiles(root)
    root.mkdir(parents=True, exist_ok=True)
    if not files.key.exists():
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        files.key.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
        files.key.chmod(0o600)
    if not files.client_secret.exists():
        files.client_secret.write_text(secrets.token_urlsafe(24))
        files.client_secret.chmod(0o600)
    return files


def _private_key(files: IssuerFiles) -> Any:
    return serialization.load_pem_private_key(files.key.read_bytes(), password=None)


def jwks(files: IssuerFiles) -> dict[str, Any]:
    """The issuer's public key as a JSON Web Key Set."""
    public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(_private_key(files).public_key()))
    return {"keys": [{**public, "kid": KEY_ID, "alg": "RS256", "use": "sig"}]}


def token_mint(
    files: IssuerFiles,
    *,
    issuer: str,
    scopes: list[str],
    audience: str | list[str],
    lifetime: int = LIFETIME,
    subject: str = CLIENT_ID,
) -> str:
    """A WLCG profile access token (wlcg.ver 1.0) signed by the issuer's key."""
    now = int(time.time())
    claims = {
        "wlcg.ver": "1.0",
        "iss": issuer,
        "sub": subject,
        "aud": audience,
        "scope": " ".join(scopes),
        "iat": now,
        "nbf": now - 60,
        "exp": now + lifetime,
        "jti": str(uuid.uuid4()),
        "client_id": subject,
    }
    return jwt.encode(claims, _private_key(files), algorithm="RS256", headers={"kid": KEY_ID})


def token_verify(files: IssuerFiles, token: str, *, issuer: str, audience: str) -> dict[str, Any]:
    """The claims of a token this issuer signed for audience (raises jwt.InvalidTokenError otherwise)."""
    public = _private_key(files).public_key()
    claims: dict[str, Any] = jwt.decode(token, public, algorithms=["RS256"], issuer=issuer, audience=audience)
    return claims


def scope_refused(scope: str) -> bool:
    """Whether the issuer refuses to grant this scope (anything beyond the WLCG storage scopes and a few plain ones)."""
    if scope in PLAIN_SCOPES:
        return False
    return not any(scope.startswith(prefix) and scope[len(prefix) :].startswith("/") for prefix in SCOPE_PREFIXES)


class IssuerServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], files: IssuerFiles, issuer: str, lifetime: int) -> None:
        self.files, self.issuer, self.lifetime = files, issuer, lifetime
        self.secret = files.client_secret.read_text().strip()
        super().__init__(address, IssuerHandler)


class IssuerHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "TestbedIssuer/1"
    server: IssuerServer

    def log_message(self, format: str, *args: Any) -> None:
        sys.stderr.write(f"{self.client_address[0]} {format % args}\n")

    def _send(self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        issuer = self.server.issuer
        if self.path == "/.well-known/openid-configuration":
            self._send(
                200,
                {
                    "issuer": issuer,
                    "jwks_uri": f"{issuer}/jwks",
                    "token_endpoint": f"{issuer}/token",
                    "grant_types_supported": ["client_credentials"],
                    "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post"],
                    "scopes_supported": [*PLAIN_SCOPES, *(f"{prefix}/" for prefix in SCOPE_PREFIXES)],
                },
            )
        elif self.path == "/jwks":
            self._send(200, jwks(self.server.files))
        else:
            self._send(404, {"error": "not_found"})

    def _client(self, form: dict[str, str]) -> tuple[str, str]:
        header = self.headers.get("Authorization", "")
        if header.lower().startswith("basic "):
            try:
                client_id, _, secret = base64.b64decode(header[6:].strip()).decode().partition(":")
            except (binascii.Error, UnicodeDecodeError):
                return "", ""
            return client_id, secret
        return form.get("client_id", ""), form.get("client_secret", "")

    def do_POST(self) -> None:
        if self.path != "/token":
            self._send(404, {"error": "not_found"})
            return
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(min(length, 65536)).decode(errors="replace")
        form = {key: values[0] for key, values in parse_qs(raw).items()}
        client_id, secret = self._client(form)
        if client_id != CLIENT_ID or not secrets.compare_digest(secret, self.server.secret):
            self._send(401, {"error": "invalid_client", "error_description": "unknown client or wrong secret"})
            return
        if form.get("grant_type") != "client_credentials":
            self._send(400, {"error": "unsupported_grant_type", "error_description": "only client_credentials"})
            return
        scopes = form.get("scope", "").split()
        refused = [scope for scope in scopes if scope_refused(scope)]
        if not scopes or refused:
            why = f"scopes not allowed: {' '.join(refused)}" if refused else "no scope asked"
            self._send(400, {"error": "invalid_scope", "error_description": why})
            return
        audience = form.get("audience", "").split() or ["https://wlcg.cern.ch/jwt/v1/any"]
        token = token_mint(
            self.server.files,
            issuer=self.server.issuer,
            scopes=scopes,
            audience=audience[0] if len(audience) == 1 else audience,
            lifetime=self.server.lifetime,
        )
        self._send(
            200,
            {
                "access_token": token,
                "token_type": "Bearer",
                "expires_in": self.server.lifetime,
                "scope": " ".join(scopes),
            },
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m testbed.issuer", description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, required=True, help="the issuer's key and client secret")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--cert", type=Path, required=True)
    parser.add_argument("--key", type=Path, required=True)
    parser.add_argument("--lifetime", type=int, default=LIFETIME, help="seconds a token is valid")
    args = parser.parse_args(argv)
    files = issuer_files_ensure(args.root)
    issuer = f"https://{args.host}:{args.port}"
    server = IssuerServer((args.host, args.port), files, issuer, args.lifetime)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(str(args.cert), str(args.key))
    server.socket = context.wrap_socket(server.socket, server_side=True)
    sys.stderr.write(f"issuer {issuer} serving (tokens valid {args.lifetime} s)\n")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    with contextlib.suppress(KeyboardInterrupt):
        thread.join()
    return 0


if __name__ == "__main__":
    sys.exit(main())
