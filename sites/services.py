"""Writes of the registry: importing the sites document (all or nothing) and exporting it back."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from django.db import connection, transaction
from django.db.models import Prefetch, QuerySet
from django.db.models.functions import Lower

from .documents import CAPACITY_KEYS, SiteEntry, sites_document_validate
from .models import Capacity, Experiment, NetworkHost, Site, StorageEndpoint

SITE_FIELDS = ("tier", "country", "contacts", "latitude", "longitude")
ENDPOINT_FIELDS = ("implementation", "kind", "tpc_modes", "rse_names")


@dataclass
class RowCounts:
    """What an import did to one kind of row. `updated` counts rows that were there and were written again."""

    created: int = 0
    updated: int = 0
    deleted: int = 0


@dataclass
class ImportSummary:
    """Counts of created, updated and deleted rows per kind, from one import."""

    experiments: RowCounts = field(default_factory=RowCounts)
    sites: RowCounts = field(default_factory=RowCounts)
    capacities: RowCounts = field(default_factory=RowCounts)
    endpoints: RowCounts = field(default_factory=RowCounts)
    network_hosts: RowCounts = field(default_factory=RowCounts)

    def as_dict(self) -> dict[str, dict[str, int]]:
        return asdict(self)

    def __str__(self) -> str:
        return "; ".join(
            f"{kind.replace('_', ' ')}: {counts['created']} created, {counts['updated']} updated, "
            f"{counts['deleted']} deleted"
            for kind, counts in self.as_dict().items()
        )


SITES_IMPORT_LOCK = 0x5175  # an arbitrary application-wide advisory lock key


@transaction.atomic
def sites_import(*, document: dict[str, Any]) -> ImportSummary:
    """Upsert a sites document, all or nothing.

    Validates the whole document first and raises `SitesDocumentError` listing every problem (nothing is
    stored). Then: experiments are upserted by name (ignoring case); sites by name; a site's experiments become
    exactly the listed ones; its capacity is upserted (fields the document leaves out become unknown, and no
    capacity in the document removes the row); its endpoints are upserted by URL and its network hosts by
    address, and those the document leaves out are deleted. Sites the document does not list are left alone.
    The number of queries does not grow with the size of the document.
    """
    # One import at a time: two concurrent imports would both validate against the same state.
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [SITES_IMPORT_LOCK])
    parsed = sites_document_validate(document=document)
    summary = ImportSummary()
    experiments = _experiments_upsert(
        names=parsed.experiments,
        references={name for site in parsed.sites for name in site.experiments},
        counts=summary.experiments,
    )
    sites = _sites_upsert(entries=parsed.sites, counts=summary.sites)
    _site_experiments_set(entries=parsed.sites, sites=sites, experiments=experiments)
    _capacities_upsert(entries=parsed.sites, sites=sites, counts=summary.capacities)
    endpoints = _endpoints_upsert(entries=parsed.sites, sites=sites, counts=summary.endpoints)
    _endpoint_experiments_set(entries=parsed.sites, endpoints=endpoints, experiments=experiments)
    _network_hosts_upsert(entries=parsed.sites, sites=sites, counts=summary.network_hosts)
    return summary


def sites_export(*, sites: QuerySet[Site] | None = None) -> dict[str, Any]:
    """The registry (or the given sites) as a sites document, in a constant number of queries.

    Null and empty optional values are left out where importing without them means the same: no contacts,
    coordinates, endpoints, network hosts, TPC modes or RSEs; unknown capacity fields. A capacity row with
    nothing known is kept as `{}` so that it survives a round trip. With `sites` given, the experiments listed
    are those of these sites; without, all experiments.
    """
    queryset = (Site.objects.all() if sites is None else sites).select_related("capacity").prefetch_related(None)
    queryset = queryset.prefetch_related(
        Prefetch("experiments", queryset=Experiment.objects.order_by("name")),
        Prefetch(
            "endpoints",
            queryset=StorageEndpoint.objects.order_by("url").prefetch_related(
                Prefetch("experiments", queryset=Experiment.objects.order_by("name"))
            ),
        ),
        Prefetch("network_hosts", queryset=NetworkHost.objects.order_by("address")),
    )
    site_documents = [_site_export(site) for site in queryset]
    if sites is None:
        experiment_names = list(Experiment.objects.order_by("name").values_list("name", flat=True))
    else:
        experiment_names = sorted({name for site in site_documents for name in site["experiments"]})
    return {"experiments": [{"name": name} for name in experiment_names], "sites": site_documents}


def _site_export(site: Site) -> dict[str, Any]:
    document: dict[str, Any] = {
        "name": site.name,
        "tier": site.tier,
        "country": site.country,
        "experiments": [experiment.name for experiment in site.experiments.all()],
    }
    if site.contacts:
        document["contacts"] = list(site.contacts)
    if site.latitude is not None:
        document["latitude"] = site.latitude
    if site.longitude is not None:
        document["longitude"] = site.longitude
    capacity = site.capacity_or_none
    if capacity is not None:
        document["capacity"] = {
            key: getattr(capacity, key) for key in CAPACITY_KEYS if getattr(capacity, key) is not None
        }
    endpoints = [_endpoint_export(endpoint) for endpoint in site.endpoints.all()]
    if endpoints:
        document["endpoints"] = endpoints
    network_hosts = [host.address for host in site.network_hosts.all()]
    if network_hosts:
        document["network_hosts"] = network_hosts
    return document


def _endpoint_export(endpoint: StorageEndpoint) -> dict[str, Any]:
    document: dict[str, Any] = {"url": endpoint.url, "implementation": endpoint.implementation, "kind": endpoint.kind}
    if endpoint.tpc_modes:
        document["tpc_modes"] = list(endpoint.tpc_modes)
    if endpoint.rse_names:
        document["rse"] = list(endpoint.rse_names)
    experiments = [experiment.name for experiment in endpoint.experiments.all()]
    if experiments:
        document["experiments"] = experiments
    return document


def _experiments_upsert(*, names: list[str], references: set[str], counts: RowCounts) -> dict[str, Experiment]:
    """Create the declared experiments that are new, respell those that exist; return every experiment the
    document names, by lower-case name."""
    wanted = {name.lower() for name in names} | {name.lower() for name in references}
    existing = {
        experiment.lower_name: experiment
        for experiment in Experiment.objects.annotate(lower_name=Lower("name")).filter(lower_name__in=wanted)
    }
    created: list[Experiment] = []
    respelled: list[Experiment] = []
    for name in names:
        experiment = existing.get(name.lower())
        if experiment is None:
            created.append(Experiment(name=name))
            continue
        counts.updated += 1
        if experiment.name != name:
            experiment.name = name
            respelled.append(experiment)
    Experiment.objects.bulk_update(respelled, ["name"])
    Experiment.objects.bulk_create(created)
    counts.created = len(created)
    return existing | {experiment.name.lower(): experiment for experiment in created}


def _sites_upsert(*, entries: list[SiteEntry], counts: RowCounts) -> dict[str, Site]:
    existing = Site.objects.in_bulk([entry.name for entry in entries], field_name="name")
    created: list[Site] = []
    updated: list[Site] = []
    for entry in entries:
        site = existing.get(entry.name) or Site(name=entry.name)
        for name in SITE_FIELDS:
            setattr(site, name, getattr(entry, name))
        (updated if site.pk else created).append(site)
    Site.objects.bulk_update(updated, SITE_FIELDS)
    Site.objects.bulk_create(created)
    counts.created, counts.updated = len(created), len(updated)
    return {site.name: site for site in (*updated, *created)}


def _site_experiments_set(
    *, entries: list[SiteEntry], sites: dict[str, Site], experiments: dict[str, Experiment]
) -> None:
    through = Site.experiments.through
    through.objects.filter(site__in=sites.values()).delete()
    through.objects.bulk_create(
        through(site_id=sites[entry.name].pk, experiment_id=experiments[name.lower()].pk)
        for entry in entries
        for name in entry.experiments
    )


def _capacities_upsert(*, entries: list[SiteEntry], sites: dict[str, Site], counts: RowCounts) -> None:
    existing = {capacity.site_id: capacity for capacity in Capacity.objects.filter(site__in=sites.values())}
    created: list[Capacity] = []
    updated: list[Capacity] = []
    for entry in entries:
        site = sites[entry.name]
        if entry.capacity is None:
            continue
        capacity = existing.pop(site.pk, None) or Capacity(site=site)
        for key in CAPACITY_KEYS:
            setattr(capacity, key, getattr(entry.capacity, key))
        (updated if capacity.pk else created).append(capacity)
    # What is left in `existing` belongs to sites whose document has no capacity.
    Capacity.objects.filter(pk__in=[capacity.pk for capacity in existing.values()]).delete()
    counts.deleted = len(existing)
    Capacity.objects.bulk_update(updated, CAPACITY_KEYS)
    Capacity.objects.bulk_create(created)
    counts.created, counts.updated = len(created), len(updated)


def _endpoints_upsert(
    *, entries: list[SiteEntry], sites: dict[str, Site], counts: RowCounts
) -> dict[str, StorageEndpoint]:
    """Upsert the endpoints by URL and delete those the document leaves out; return them by URL."""
    existing = {endpoint.url: endpoint for endpoint in StorageEndpoint.objects.filter(site__in=sites.values())}
    created: list[StorageEndpoint] = []
    updated: list[StorageEndpoint] = []
    for entry in entries:
        for endpoint_entry in entry.endpoints:
            # Validation made sure that a URL already stored belongs to this very site.
            endpoint = existing.pop(endpoint_entry.url, None) or StorageEndpoint(site=sites[entry.name])
            endpoint.set_url(endpoint_entry.url)
            for name in ENDPOINT_FIELDS:
                setattr(endpoint, name, getattr(endpoint_entry, name))
            (updated if endpoint.pk else created).append(endpoint)
    StorageEndpoint.objects.filter(pk__in=[endpoint.pk for endpoint in existing.values()]).delete()
    counts.deleted = len(existing)
    StorageEndpoint.objects.bulk_update(updated, ENDPOINT_FIELDS)
    StorageEndpoint.objects.bulk_create(created)
    counts.created, counts.updated = len(created), len(updated)
    return {endpoint.url: endpoint for endpoint in (*updated, *created)}


def _endpoint_experiments_set(
    *, entries: list[SiteEntry], endpoints: dict[str, StorageEndpoint], experiments: dict[str, Experiment]
) -> None:
    """Each endpoint serves exactly the experiments its entry lists (validation made them its site's)."""
    through = StorageEndpoint.experiments.through
    through.objects.filter(storageendpoint__in=endpoints.values()).delete()
    through.objects.bulk_create(
        through(storageendpoint_id=endpoints[endpoint.url].pk, experiment_id=experiments[name.lower()].pk)
        for entry in entries
        for endpoint in entry.endpoints
        for name in endpoint.experiments
    )


def _network_hosts_upsert(*, entries: list[SiteEntry], sites: dict[str, Site], counts: RowCounts) -> None:
    existing = {host.address: host for host in NetworkHost.objects.filter(site__in=sites.values())}
    created: list[NetworkHost] = []
    for entry in entries:
        for address in entry.network_hosts:
            if existing.pop(address, None) is not None:
                counts.updated += 1
            else:
                created.append(NetworkHost(site=sites[entry.name], address=address))
    NetworkHost.objects.filter(pk__in=[host.pk for host in existing.values()]).delete()
    counts.deleted = len(existing)
    NetworkHost.objects.bulk_create(created)
    counts.created = len(created)
