"""Reads of the registry."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from urllib.parse import urlsplit

from django.db.models import QuerySet

from .models import Experiment, Site, StorageEndpoint


def sites_with_details() -> QuerySet[Site]:
    """Sites with everything the list and detail pages show, in a constant number of queries."""
    return Site.objects.select_related("capacity").prefetch_related("experiments", "endpoints", "network_hosts")


def experiment_names() -> list[str]:
    return list(Experiment.objects.values_list("name", flat=True))


def _longest_prefix(url: str, endpoints: Iterable[StorageEndpoint]) -> StorageEndpoint | None:
    best: StorageEndpoint | None = None
    for endpoint in endpoints:
        base = endpoint.url.rstrip("/")
        if (url == base or url.startswith(base + "/")) and (best is None or len(base) > len(best.url.rstrip("/"))):
            best = endpoint
    return best


def endpoint_for_url(url: str) -> StorageEndpoint | None:
    """The registered endpoint whose URL is the longest prefix of url (hosts alone are ambiguous on a testbed)."""
    parts = urlsplit(url)
    candidates = StorageEndpoint.objects.select_related("site").filter(
        scheme=parts.scheme.lower(), host=(parts.hostname or "").lower()
    )
    return _longest_prefix(url, candidates)


def endpoint_matcher() -> Callable[[str], StorageEndpoint | None]:
    """endpoint_for_url for many URLs: the endpoints (with site and capacity) read once, matched in memory."""
    endpoints = list(StorageEndpoint.objects.select_related("site", "site__capacity"))
    return lambda url: _longest_prefix(url, endpoints)


def door_of(url: str) -> tuple[str, str, int | None]:
    """A storage URL's door: (scheme, host, port). Records are matched to sites by their doors."""
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = None
    return parts.scheme.lower(), (parts.hostname or "").lower(), port


def door_owner_problem(*, url: str, site_id: int | None, exclude_pk: int | None = None) -> str | None:
    """Why url's door (scheme://host:port) cannot be this site's: another site has an endpoint behind it. A door
    belongs to one site, or records would be counted for whichever registered it last."""
    scheme, host, port = door_of(url)
    other = (
        StorageEndpoint.objects.filter(scheme=scheme, host=host, port=port)
        .exclude(site_id=site_id)
        .exclude(pk=exclude_pk)
        .select_related("site")
        .first()
    )
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
