"""Where a measurement of the portal's own was taken, said one way on every surface (the challenge's FROM x TO matrix
and its exports, a sweep's tables, their CSV and JSON, and the sweeps API): "measured at SITE by its agent" for the
runs a site's agent ran from the site (runs.Run.agent), "measured at SITE by the portal's worker there" for a sweep
step sent to a site's own Celery worker, and "measured by the portal's workers" for the rest. A cell made of several
runs names each way once. Records that DDM systems sent (FTS, Rucio, perfSONAR) were not measured by the portal: a
cell of those only has no label (None)."""

from __future__ import annotations

from collections.abc import Collection, Iterable

from sites.models import SiteAgent

PORTAL_WORKERS = "measured by the portal's workers"


def measured_label(*, agents: Iterable[str] = (), site_workers: Iterable[str] = (), portal: bool = False) -> str | None:
    """The label of what was measured by the agents of these sites, the portal's workers at these sites, and (portal)
    the portal's own workers; None when by none of them."""
    parts = [f"measured at {site} by its agent" for site in sorted(set(agents), key=str.lower)]
    parts += [f"measured at {site} by the portal's worker there" for site in sorted(set(site_workers), key=str.lower)]
    if portal:
        parts.append(PORTAL_WORKERS)
    return "; ".join(parts) or None


def runs_agent_sites(run_ids: Collection[int]) -> dict[int, str]:
    """The site of the agent that ran each of these runs (runs by the portal's workers are left out): one query,
    through the agents' side of Run.agent so that this floor needs nothing of runs/."""
    if not run_ids:
        return {}
    found = SiteAgent.objects.filter(runs__in=list(run_ids)).values_list("runs", "site__name").order_by()
    return {run_id: site for run_id, site in found}


def runs_measured_label(run_ids: Collection[int], agent_sites: dict[int, str]) -> str | None:
    """The label of a set of runs, given runs_agent_sites of (at least) them."""
    agents = [agent_sites[run_id] for run_id in run_ids if run_id in agent_sites]
    return measured_label(agents=agents, portal=any(run_id not in agent_sites for run_id in run_ids))
