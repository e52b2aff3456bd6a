"""Reads of the registry."""

from __future__ import annotations

from django.db.models import QuerySet

from .matching import url_door
from .models import Experiment, Site, StorageEndpoint


def sites_with_details() -> QuerySet[Site]:
    """Sites with everything the list and detail pages show, in a constant number of queries."""
    return Site.objects.select_related("capacity").prefetch_related("experiments", "endpoints", "network_hosts")


def experiment_names() -> list[str]:
    return list(Experiment.objects.values_list("name", flat=True))


def door_of(url: str) -> tuple[str, str, int | None]:
    """A storage URL's door: (scheme, host, port), the scheme's default port when none is written, as the matcher
    reads it (sites.matching). Records are matched to sites by their doors."""
    return url_door(url)


def door_owner_problem(*, url: str, site_id: int | None, exclude_pk: int | None = None) -> str | None:
    """Why url's door (scheme://host:port) cannot be this site's: another site has an endpoint behind it. A door
    belongs to one site, or records would be counted for whichever registered it last."""
    door = door_of(url)
    scheme, host, port = door
    others = StorageEndpoint.objects.filter(host=host).exclude(site_id=site_id).exclude(pk=exclude_pk)
    other = next((other for other in others.select_related("site") if door_of(other.url) == door), None)
    if other is None:
        return None
    where = f"{scheme}://{host}" + (f":{port}" if port else "")
    return f"{where} is a storage door of {other.site.name} ({other.url}): a door belongs to one site"


def rse_owner_problem(*, names: list[str], site_id: int | None, exclude_pk: int | None = None) -> str | None:
    """Why these RSE names cannot be this site's: another site's endpoint carries one of them."""
    if not names:
        return None
    other = (
        StorageEndpoint.objects.filter(rse_names__overlap=names)
        .exclude(site_id=site_id)
        .exclude(pk=exclude_pk)
        .select_related("site")
        .first()
    )
    if other is None:
        return None
    shared = sorted(set(names) & set(other.rse_names))
    return f"RSE {', '.join(shared)} belongs to {other.site.name} ({other.url}): an RSE belongs to one site"
