"""The testbed's certificate authority and host certificate, made with openssl on first start.

Layout under `<testbed>/pki/`: `ca/` (the CA's key and certificate), `certificates/` (the CA certificate,
`openssl rehash`ed: point X509_CERT_DIR here), `host/` (hostcert.pem, hostkey.pem for the servers, valid for
localhost and 127.0.0.1, and for the sites' own addresses once a namespaced testbed asked for them).
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

CA_SUBJECT = "/O=Data Challenge Portal/OU=Testbed/CN=Testbed CA"
HOST_SUBJECT = "/O=Data Challenge Portal/OU=Testbed/CN=localhost"


@dataclass(frozen=True)
class Pki:
    """Paths of the testbed's CA, CA directory and host credentials."""

    root: Path

    @property
    def ca_cert(self) -> Path:
        return self.root / "ca" / "ca.pem"

    @property
    def ca_key(self) -> Path:
        return self.root / "ca" / "ca.key"

    @property
    def cert_dir(self) -> Path:
        """The hashed CA directory that clients take as X509_CERT_DIR."""
        return self.root / "certificates"

    @property
    def host_cert(self) -> Path:
        return self.root / "host" / "hostcert.pem"

    @property
    def host_key(self) -> Path:
        return self.root / "host" / "hostkey.pem"

    @property
    def host_bundle(self) -> Path:
        """Certificate and key in one file, for servers that want them together."""
        return self.root / "host" / "hostcert-and-key.pem"


def _openssl(*args: str) -> None:
    result = subprocess.run(["openssl", *args], capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"openssl {args[0]} failed: {result.stderr.strip()}")


LOOPBACK_NAMES = ("DNS:localhost", "IP:127.0.0.1", "IP:::1")


def _host_names(ext: Path) -> set[str]:
    """The names the host certificate was made for (its extension file's subjectAltName)."""
    try:
        lines = ext.read_text().splitlines()
    except OSError:
        return set()
    for line in lines:
        if line.startswith("subjectAltName="):
            return {name.strip() for name in line.removeprefix("subjectAltName=").split(",")}
    return set()


def ensure_pki(root: Path, *, addresses: Sequence[str] = ()) -> Pki:
    """Create the CA and the host certificate once; later calls reuse them. A host certificate that does not name
    every one of `addresses` (IPv4 addresses of the namespaced testbed's sites) is made again, by the same CA, for
    those it named and these: clients that trust the CA trust it."""
    pki = Pki(root)
    ext = root / "host" / "host.ext"
    wanted = set(LOOPBACK_NAMES) | {f"IP:{address}" for address in addresses}
    if pki.host_cert.exists() and pki.host_key.exists() and any(pki.cert_dir.glob("*.0")):
        have = _host_names(ext) or set(LOOPBACK_NAMES)
        if wanted <= have:
            return pki
        wanted |= have
    for sub in ("ca", "certificates", "host"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    if not pki.ca_cert.exists():
        _openssl(
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "3650",
            "-subj",
            CA_SUBJECT,
            "-keyout",
            str(pki.ca_key),
            "-out",
            str(pki.ca_cert),
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
        )
    csr = root / "host" / "host.csr"
    names = [*LOOPBACK_NAMES, *sorted(wanted - set(LOOPBACK_NAMES))]
    ext.write_text(
        "basicConstraints=CA:FALSE\n"
        "keyUsage=critical,digitalSignature,keyEncipherment\n"
        "extendedKeyUsage=serverAuth,clientAuth\n"
        f"subjectAltName={','.join(names)}\n"
    )
    _openssl(
        "req", "-newkey", "rsa:2048", "-nodes", "-subj", HOST_SUBJECT, "-keyout", str(pki.host_key), "-out", str(csr)
    )
    _openssl(
        "x509",
        "-req",
        "-in",
        str(csr),
        "-CA",
        str(pki.ca_cert),
        "-CAkey",
        str(pki.ca_key),
        "-CAcreateserial",
        "-days",
        "825",
        "-extfile",
        str(ext),
        "-out",
        str(pki.host_cert),
    )
    pki.host_key.chmod(0o600)
    pki.host_bundle.write_text(pki.host_cert.read_text() + pki.host_key.read_text())
    pki.host_bundle.chmod(0o600)
    target = pki.cert_dir / "testbed-ca.pem"
    if not target.exists() or target.read_text() != pki.ca_cert.read_text():
        target.write_text(pki.ca_cert.read_text())
        _openssl("rehash", str(pki.cert_dir))
    return pki
