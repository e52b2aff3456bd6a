"""Site agents' credentials: enrol (the key is shown once, in the agent's configuration), verify, rotate, revoke,
and what an agent says of itself. The database keeps only SHA-256 hashes of keys, as for API tokens.

An agent's configuration (`agent_config`) holds what the agent needs to reach the portal as its site's agent and
nothing of the portal's own: no database URL, no broker URL, no SECRET_KEY (tests/sites/test_agents.py checks it).
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from .models import Site, SiteAgent
from .tokens import PREFIX_LENGTH, token_hash

KEY_PREFIX = "agt_"  # tells an agent's key from an API token's at a glance (and to secret scanners)
# last_seen is written at most this often by calls other than the heartbeat, so a long poll costs no write.
LAST_SEEN_RESOLUTION = timedelta(seconds=10)


class AgentKeyError(Exception):
    """A key that does not authenticate an agent; the message says why (shown to the agent)."""


def _key_new() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


def agent_enroll(*, site: Site, name: str = "agent") -> tuple[SiteAgent, str]:
    """A new agent credential for `site`; returns it and its key (the key exists only in this return value).
    ValidationError when the site has a live agent of that name already (rotate it, or revoke it first)."""
    name = name.strip() or "agent"
    if SiteAgent.objects.filter(site=site, name=name, revoked__isnull=True).exists():
        raise ValidationError(f"{site.name} has an agent named {name!r} already: rotate its key, or revoke it first")
    key = _key_new()
    with transaction.atomic():
        SiteAgent.objects.filter(site=site, name=name, revoked__isnull=False).delete()
        agent = SiteAgent.objects.create(site=site, name=name, prefix=key[:PREFIX_LENGTH], key_hash=token_hash(key=key))
    return agent, key


def agent_rotate(*, agent: SiteAgent) -> str:
    """A new key for the agent: the old one stops working now. ValidationError for a revoked agent."""
    if agent.revoked is not None:
        raise ValidationError(f"agent {agent} was revoked: enrol a new one")
    key = _key_new()
    agent.prefix, agent.key_hash, agent.rotated = key[:PREFIX_LENGTH], token_hash(key=key), timezone.now()
    agent.save(update_fields=["prefix", "key_hash", "rotated"])
    return key


def agent_revoke(*, agent: SiteAgent) -> None:
    """Revoke the agent from now on (its key no longer authenticates; its site's work goes to the site's Celery
    queue again); revoking it again keeps the first time."""
    if agent.revoked is None:
        agent.revoked = timezone.now()
        agent.save(update_fields=["revoked"])


def agent_verify(*, key: str) -> SiteAgent:
    """The live agent of a key, its last call noted. Raises AgentKeyError."""
    agent = SiteAgent.objects.select_related("site").filter(key_hash=token_hash(key=key)).first()
    if agent is None:
        raise AgentKeyError("Invalid agent key.")
    if agent.revoked is not None:
        raise AgentKeyError("Agent revoked.")
    now = timezone.now()
    if agent.last_seen is None or now - agent.last_seen >= LAST_SEEN_RESOLUTION:
        SiteAgent.objects.filter(pk=agent.pk).filter(
            Q(last_seen__isnull=True) | Q(last_seen__lte=now - LAST_SEEN_RESOLUTION)
        ).update(last_seen=now)
        agent.last_seen = now
    return agent


def agent_report(*, agent: SiteAgent, version: str, kinds: Sequence[str], in_flight: int) -> None:
    """What the agent says of itself at each heartbeat: its version, the probe kinds it runs, its work in flight."""
    SiteAgent.objects.filter(pk=agent.pk).update(
        version=version[:32],
        kinds=[str(kind)[:16] for kind in kinds][:16],
        in_flight=in_flight,
        last_seen=timezone.now(),
    )


def site_has_agent(*, site: Site) -> bool:
    """Whether the site's work goes to its agent (a live one is enrolled) rather than to a Celery queue."""
    return SiteAgent.objects.filter(site=site, revoked__isnull=True).exists()


def agent_config(
    *, agent: SiteAgent, key: str, portal_url: str, ca_bundle: str = "", spool: str = "", slots: int = 8
) -> dict[str, Any]:
    """Everything an agent needs, as the JSON `python -m agent --config FILE` reads: where the portal is, how to
    trust it, the agent's key and site; nothing of the portal's own secrets."""
    return {
        "portal_url": portal_url.rstrip("/"),
        "site": agent.site.name,
        "name": agent.name,
        "key": key,
        "ca_bundle": ca_bundle,
        "spool": spool or f"/var/lib/portal-agent/{agent.site.name}/spool",
        "slots": slots,
        "credentials": {"x509_proxy": "", "x509_cert_dir": "/etc/grid-security/certificates", "token_file": ""},
    }
