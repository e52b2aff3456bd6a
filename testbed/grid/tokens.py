"""A testbed that requires tokens (TESTBED_TOKENS=required): its issuer, and the XRootD doors set up to check WLCG
JWTs with Debian's xrootd-scitokens-plugins (libXrdAccSciTokens), as DC24's storage did.

- The issuer (testbed/issuer.py) serves its OpenID configuration and keys over HTTPS with the testbed's host
  certificate. The token plugin (libscitokens 0.7.3, through libcurl) trusts only the system's CA bundle and has no
  option for another: each XRootD server of a token testbed runs in a mount namespace of its own
  (`unshare --mount`, root only) in which /etc/ssl/certs holds the system's bundle plus the testbed CA. Nothing
  outside that process sees the change.
- davs:// (XrdHttp, HTTP-TPC pull and push): the bearer token of the Authorization header (`http.header2cgi`);
  root://: the token in the URL's `authz` CGI (what gfal2's xrootd plugin 2.21 can carry per URL); not ztn (see
  docs/operator/tokens.md for what was measured).
- Authorisation by scope and path: base_path "/" so that a scope names the path as it appears in the URL
  (storage.create:/data/portal-runs/...); the audience is the door (https://HOST:PORT, root://HOST:PORT).
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from common import processes

from ..issuer import IssuerFiles, issuer_files_ensure
from .config import REPO, XROOTD_USER, TestbedPart

SYSTEM_CERTS = Path("/etc/ssl/certs")
SYSTEM_BUNDLE = SYSTEM_CERTS / "ca-certificates.crt"


class TokensMixin(TestbedPart):
    """The token side of Testbed: its issuer process and the XRootD configuration lines that check tokens."""

    @property
    def tokens_required(self) -> bool:
        return self.config.tokens == "required"

    @property
    def issuer_files(self) -> IssuerFiles:
        return IssuerFiles(self.pki.root / "issuer")

    @property
    def issuer_url(self) -> str:
        return f"https://{self.config.host}:{self.ports()['issuer']}"

    @property
    def token_endpoint(self) -> str:
        return f"{self.issuer_url}/token"

    def client_credentials(self) -> tuple[str, str]:
        """The issuer's one client: (client id, client secret)."""
        from ..issuer import CLIENT_ID

        files = issuer_files_ensure(self.issuer_files.root)
        return CLIENT_ID, files.client_secret.read_text().strip()

    def _start_issuer(self) -> None:
        issuer_files_ensure(self.issuer_files.root)
        argv = [
            sys.executable,
            "-m",
            "testbed.issuer",
            "--root",
            str(self.issuer_files.root),
            "--host",
            self.config.host,
            "--port",
            str(self.ports()["issuer"]),
            "--cert",
            str(self.pki.host_cert),
            "--key",
            str(self.pki.host_key),
            "--lifetime",
            str(self.config.token_lifetime),
        ]
        self._start("issuer", argv, cwd=REPO)

    # --- XRootD --------------------------------------------------------------------------------------------

    def _server_trust(self) -> Path:
        """/etc/ssl/certs as the token plugin sees it: the system's bundle with the testbed CA added, and the CA
        hashed (libcurl reads both the bundle and the directory)."""
        target = self.dir / "pki" / "server-trust"
        target.mkdir(parents=True, exist_ok=True)
        system = SYSTEM_BUNDLE.read_text() if SYSTEM_BUNDLE.exists() else ""
        (target / "ca-certificates.crt").write_text(system + "\n" + self.pki.ca_cert.read_text())
        for hashed in self.pki.cert_dir.glob("*.0"):
            shutil.copyfile(hashed, target / hashed.name)
        return target

    def token_wrapped(self, argv: list[str]) -> list[str]:
        """argv run in a mount namespace whose /etc/ssl/certs trusts the testbed CA (the issuer's certificate)."""
        if not self.tokens_required:
            return argv
        if not processes.is_root():
            raise RuntimeError("TESTBED_TOKENS=required needs root (the XRootD servers' CA trust is a bind mount)")
        trust = self._server_trust()
        script = f'mount --bind {trust} {SYSTEM_CERTS} && exec "$@"'
        return ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", script, "sh", *argv]

    def xrootd_token_lines(self, key: str, audiences: list[str]) -> list[str]:
        """The configuration lines of an XRootD server that requires a valid token for every access, and its
        scitokens.cfg (accepting the testbed's issuer, audiences `audiences`)."""
        if not self.tokens_required:
            return []
        base = self.dir / "sites" / key
        cache = base / "token-cache"
        cache.mkdir(parents=True, exist_ok=True)
        config = base / "scitokens.cfg"
        config.write_text(
            "[Global]\n"
            f"audience = {', '.join(audiences)}\n"
            "onmissing = deny\n\n"
            "[Issuer testbed]\n"
            f"issuer = {self.issuer_url}\n"
            "base_path = /\n"
            f"default_user = {XROOTD_USER}\n"
        )
        return [
            # No "++": the token plugin is the only authorisation, so a request without a valid token is refused.
            "ofs.authorize 1",
            f"ofs.authlib libXrdAccSciTokens.so config={config}",
            "http.header2cgi Authorization authz",
            # root:// carries the token in the URL's authz CGI. The ztn protocol (the token as the connection's
            # credential, over TLS) is not configured: with it, native third-party copies failed (docs/operator/
            # tokens.md), and gfal2 2.21 cannot give ztn a token per URL.
        ]

    def xrootd_token_env(self, key: str) -> dict[str, str] | None:
        """The environment of a token-checking XRootD: libscitokens caches the issuer's keys under XDG_CACHE_HOME."""
        if not self.tokens_required:
            return None
        import os

        # X509_CERT_DIR: what the xrdcp of a native third-party copy trusts, should its source speak TLS.
        return {
            **os.environ,
            "XDG_CACHE_HOME": str(self.dir / "sites" / key / "token-cache"),
            "X509_CERT_DIR": str(self.pki.cert_dir),
        }
