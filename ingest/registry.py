"""The registry as ingestion matches against it: experiments by VO, storage URLs and RSE names to sites and
endpoints (sites.matching, whose index is read once per batch), network hosts to sites."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sites.matching import EndpointIndex, EndpointMatch, url_host
from sites.models import Experiment, NetworkHost

from .errors import ItemError

SiteMatch = EndpointMatch  # (site id, endpoint id or None)
StorageOfUrl = tuple[str, int | None, int | None]  # (host, site id, endpoint id)


@dataclass
class Registry:
    """What records are matched against: experiments by name (any case), storage URLs by the registry's one matcher
    (sites.matching: RSE name, door, longest path, the experiments an endpoint serves), network hosts by address."""

    endpoints: EndpointIndex
    experiments: dict[str, int] = field(default_factory=dict)
    experiment_names: dict[int, str] = field(default_factory=dict)
    network: dict[str, int] = field(default_factory=dict)
    # The host of each scheme://authority met in the batch: a batch's tens of thousands of URLs name a few doors.
    hosts: dict[str, str] = field(default_factory=dict)

    @classmethod
    def load(cls) -> Registry:
        registry = cls(endpoints=EndpointIndex.load())
        for pk, name in Experiment.objects.values_list("pk", "name"):
            registry.experiments[name.lower()] = pk
            registry.experiment_names[pk] = name
        for site_id, address in NetworkHost.objects.values_list("site_id", "address"):
            registry.network[address.lower()] = site_id
            registry.network.setdefault(address_host(address), site_id)
        return registry

    def experiment(self, vo: Any) -> int:
        found = self.experiments.get(vo) if type(vo) is str else None  # names as written, after the first
        if found is not None:
            return found
        if not isinstance(vo, str) or not vo.strip():
            raise ItemError("vo: missing")
        try:
            found = self.experiments[vo.strip().lower()]
        except KeyError:
            raise ItemError(f"vo: {vo!r} is not an experiment of the registry") from None
        self.experiments[vo] = found
        return found

    def storage(self, url: str, rse: Any = None, *, experiment_id: int | None = None) -> SiteMatch | None:
        """The site (and endpoint) of a storage URL, by the registry's one matcher (sites.matching)."""
        return self.endpoints.match(url, experiment_id=experiment_id, rse=rse)

    def storage_of_url(self, url: str, rse: Any = None, *, experiment_id: int | None = None) -> StorageOfUrl:
        """The host of a storage URL and its site and endpoint (storage())."""
        match = self.endpoints.match(url, experiment_id=experiment_id, rse=rse)
        start = url.find("//")
        start = url.find("/", start + 2) if start >= 0 else -1
        authority = url if start < 0 else url[:start]  # the host is read from it alone (sites.matching.url_parts)
        host = self.hosts.get(authority)
        if host is None:
            host = self.hosts[authority] = url_host(authority)
        return (host, *(match or (None, None)))

    def network_site(self, address: str) -> int | None:
        address = address.lower()
        found = self.network.get(address)
        return self.network.get(address_host(address)) if found is None else found


def address_host(address: str) -> str:
    """The host of a network host address: "host", "host:port", "[v6]:port" or a bare IPv6 address."""
    address = address.lower()
    if address.startswith("["):
        return address[1 : address.find("]")] if "]" in address else address
    return address.rsplit(":", 1)[0] if address.count(":") == 1 else address
