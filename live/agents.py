"""Sites' agents as the now board shows them: each live agent of the challenge's sites, its version, probe kinds,
jobs in flight and how long ago it last called the portal; silent past AGENT_SILENT_MINUTES (the `agent_silent`
alert, live.alerts, reads the same rows)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from challenges.models import Activity, Challenge, Target
from sites.models import SiteAgent

# An agent beats every 5 s (its default); five minutes without a call is not a slow link but an agent gone.
AGENT_SILENT_MINUTES = 5


def challenge_site_ids_all(*, challenge: Challenge) -> set[int]:
    """Every site the challenge's plan names (the alerts', which keep their own audience; the board reads
    live.now.challenge_site_ids, as its reader may)."""
    ids: set[int] = set()
    for row in Target.objects.filter(activity__challenge=challenge).values_list(
        "site_id", "link_from_id", "link_to_id"
    ):
        ids.update(value for value in row if value)
    ids.update(v for v in Activity.objects.filter(challenge=challenge).values_list("source_id", flat=True) if v)
    return ids


def agents_now(*, site_ids: set[int], at: datetime) -> list[dict[str, Any]]:
    """The live agents of these sites, by site and name, with how long each has been silent at `at`."""
    agents = SiteAgent.objects.filter(site_id__in=site_ids, revoked__isnull=True)
    rows = []
    for agent in agents.select_related("site").order_by("site__name", "name"):
        age = agent.silent_seconds(at)
        rows.append(
            {
                "site": agent.site.name,
                "site_id": agent.site_id,
                "name": agent.name,
                "version": agent.version,
                "kinds": list(agent.kinds),
                "in_flight": agent.in_flight,
                "last_seen": agent.last_seen,
                "age_seconds": age,
                "silent": age >= AGENT_SILENT_MINUTES * 60,
            }
        )
    return rows
