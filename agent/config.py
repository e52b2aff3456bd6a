"""The agent's configuration: the JSON file `manage.py agent_enroll` writes (the portal's URL, the agent's key and
site, how to trust the portal, where to spool results, the site's grid credentials). Nothing else configures it:
it runs with an empty environment as well as with any."""

from __future__ import annotations

import ipaddress
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit


class ConfigError(ValueError):
    """A configuration the agent cannot run with; the message says which field and why."""


@dataclass(frozen=True)
class Credentials:
    """The site's own grid credentials, as its gfal2 finds them: an X.509 proxy and the CA directory, a bearer
    token file kept fresh by oidc-agent or htgettoken, or (a testbed) one bearer token for some URL prefixes."""

    x509_proxy: str = ""
    x509_cert_dir: str = ""
    token_file: str = ""
    bearer_token: str = ""
    bearer_prefixes: tuple[str, ...] = ()


@dataclass(frozen=True)
class AgentConfig:
    portal_url: str
    site: str
    key: str
    name: str = "agent"
    ca_bundle: str = ""
    spool: str = ""
    slots: int = 8
    heartbeat: float = 5.0
    credentials: Credentials = field(default_factory=Credentials)

    @property
    def insecure_allowed(self) -> bool:
        """Plain http only to a testbed address: loopback or a private network (the namespaced testbed's bridge)."""
        host = urlsplit(self.portal_url).hostname or ""
        if host == "localhost":
            return True
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            return False
        return address.is_loopback or address.is_private


def config_load(path: str | Path) -> AgentConfig:
    """The configuration in `path`; ConfigError naming the field that is wrong."""
    try:
        raw = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read the configuration {path}: {exc}") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: the configuration is a JSON object")
    return config_from(raw)


def config_from(raw: dict[str, Any]) -> AgentConfig:
    for name in ("portal_url", "site", "key"):
        if not isinstance(raw.get(name), str) or not raw[name]:
            raise ConfigError(f"{name}: needed (a string)")
    credentials = raw.get("credentials") or {}
    if not isinstance(credentials, dict):
        raise ConfigError("credentials: an object")
    try:
        config = AgentConfig(
            portal_url=raw["portal_url"].rstrip("/"),
            site=raw["site"],
            key=raw["key"],
            name=str(raw.get("name") or "agent"),
            ca_bundle=str(raw.get("ca_bundle") or ""),
            spool=str(raw.get("spool") or ""),
            slots=int(raw.get("slots") or 8),
            heartbeat=float(raw.get("heartbeat") or 5.0),
            credentials=Credentials(
                x509_proxy=str(credentials.get("x509_proxy") or ""),
                x509_cert_dir=str(credentials.get("x509_cert_dir") or ""),
                token_file=str(credentials.get("token_file") or ""),
                bearer_token=str(credentials.get("bearer_token") or ""),
                bearer_prefixes=tuple(str(prefix) for prefix in credentials.get("bearer_prefixes") or ()),
            ),
        )
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"a number is not a number: {exc}") from None
    url = urlsplit(config.portal_url)
    if url.scheme not in ("http", "https") or not url.hostname:
        raise ConfigError(f"portal_url: an https:// URL, not {config.portal_url!r}")
    if url.scheme == "http" and not config.insecure_allowed:
        raise ConfigError("portal_url: https:// (plain http only to a testbed's loopback or private address)")
    if not config.spool:
        raise ConfigError("spool: the directory for results not yet delivered")
    if not 1 <= config.slots <= 64 or not 0.5 <= config.heartbeat <= 60:
        raise ConfigError("slots: 1 to 64; heartbeat: 0.5 to 60 s")
    return config
