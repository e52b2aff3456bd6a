"""What the plan offers a run that was not given its ends: an activity's sites, the endpoints of a site that serve
the run's experiment and that the workers speak (in an order of schemes), the site of a URL."""

from __future__ import annotations

from collections.abc import Sequence

from challenges.models import Activity
from sites.matching import endpoint_serves, storage_for_url
from sites.models import Experiment, Site, StorageEndpoint

from ..dispatch import worker_schemes

HTTP_SCHEMES = ("davs", "https", "dav", "http")
ROOT_SCHEMES = ("root", "roots", "xroot", "xroots")


def serving(endpoints: Sequence[StorageEndpoint], experiment: Experiment | None) -> list[StorageEndpoint]:
    """The endpoints that serve the run's experiment (sites.matching: those naming it, or naming none, their
    site's); all of them for a run of no experiment."""
    if experiment is None:
        return list(endpoints)
    return [endpoint for endpoint in endpoints if endpoint_serves(endpoint=endpoint, experiment_id=experiment.pk)]


def serving_note(experiment: Experiment | None) -> str:
    return f" serving {experiment}" if experiment is not None else ""


def pick_endpoint(
    site: Site, *, prefer: Sequence[str], kind: str = "disk", experiment: Experiment | None = None
) -> StorageEndpoint | None:
    """The site's endpoint of this kind (disk, tape) that serves the experiment and that the workers speak, in the
    order of schemes `prefer`."""
    spoken = [e for e in site.endpoints.all() if e.kind == kind and e.scheme in worker_schemes()]
    endpoints = serving(spoken, experiment)
    for scheme in prefer:
        for endpoint in endpoints:
            if endpoint.scheme == scheme:
                return endpoint
    return endpoints[0] if endpoints else None


def activity_sites(activity: Activity) -> list[Site]:
    """The sites an activity's probe points at: its targets' sites (the far end of a link), then its source."""
    sites: list[Site] = []
    for target in activity.targets.select_related("site", "link_to"):
        site = target.link_to if target.is_link else target.site
        if site is not None and site not in sites:
            sites.append(site)
    if activity.source is not None and activity.source not in sites:
        sites.append(activity.source)
    return sites


def activity_site_names(sites: Sequence[Site]) -> str:
    return ", ".join(site.name for site in sites) or "no site (give it targets or a source)"


def site_of_url(url: str, experiment: Experiment | None) -> Site | None:
    return storage_for_url(url, experiment_id=experiment.pk if experiment else None)[0]
