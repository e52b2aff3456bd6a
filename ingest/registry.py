"""The registry as ingestion matches against it: experiments by VO, storage doors (scheme, host, port, path) and
RSE names to sites and endpoints, network hosts to sites; read once per batch."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any
from urllib.parse import urlsplit

from sites.models import Experiment, NetworkHost, StorageEndpoint

from .errors import ItemError

SiteMatch = tuple[int, int | None]  # (site id, endpoint id or None)
StorageOfUrl = tuple[str, int | None, int | None]  # (host, site id, endpoint id)
# A batch names a few storage doors thousands of times; a dump or a stream read with one registry could name
# many more, so the cache of their matches is emptied past this size rather than grown without end.
STORAGE_CACHE_SIZE = 4096


@dataclass
class Registry:
    """What records are matched against: experiments by name (any case), storage endpoints by host and port, by
    host alone when all of a host's endpoints are one site's, and by RSE name; network hosts by address."""

    experiments: dict[str, int] = field(default_factory=dict)
    experiment_names: dict[int, str] = field(default_factory=dict)
    by_host_port: dict[tuple[str, int | None], SiteMatch] = field(default_factory=dict)
    by_host: dict[str, SiteMatch] = field(default_factory=dict)
    by_rse: dict[str, SiteMatch] = field(default_factory=dict)
    network: dict[str, int] = field(default_factory=dict)
    _storage_of_url: dict[tuple[str | None, str], StorageOfUrl] = field(default_factory=dict, repr=False)

    @classmethod
    def load(cls) -> Registry:
        registry = cls()
        for pk, name in Experiment.objects.values_list("pk", "name"):
            registry.experiments[name.lower()] = pk
            registry.experiment_names[pk] = name
        sites_of_host: dict[str, set[int]] = {}
        endpoints_of_host: dict[str, list[int]] = {}
        for pk, site_id, host, port, scheme, rses in StorageEndpoint.objects.values_list(
            "pk", "site_id", "host", "port", "scheme", "rse_names"
        ):
            registry.by_host_port[(host, port or DEFAULT_PORTS.get(scheme))] = (site_id, pk)
            sites_of_host.setdefault(host, set()).add(site_id)
            endpoints_of_host.setdefault(host, []).append(pk)
            for rse in rses:
                registry.by_rse[rse.upper()] = (site_id, pk)
        for host, sites in sites_of_host.items():
            if len(sites) == 1:
                endpoints = endpoints_of_host[host]
                registry.by_host[host] = (next(iter(sites)), endpoints[0] if len(endpoints) == 1 else None)
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

    def storage(self, url: str, rse: Any = None) -> SiteMatch | None:
        """The site (and endpoint) of a storage URL: by RSE name when given and known, else by host and port,
        else by host alone."""
        if isinstance(rse, str) and rse:
            match = self.by_rse.get(rse.upper())
            if match:
                return match
        host, port = url_authority(url)
        return self.by_host_port.get((host, port)) or self.by_host.get(host)

    def storage_of_url(self, url: str, rse: Any = None) -> StorageOfUrl:
        """The host of a storage URL and its site and endpoint (storage()), once per RSE name and scheme://host:port
        of the URL."""
        start = url.find("//")
        end = url.find("/", start + 2) if start >= 0 else -1
        key = (rse if type(rse) is str else None, url if end < 0 else url[:end])
        found = self._storage_of_url.get(key)
        if found is None:
            match = self.storage(url, rse)
            found = (url_authority(url)[0], *(match or (None, None)))
            if len(self._storage_of_url) >= STORAGE_CACHE_SIZE:
                self._storage_of_url.clear()
            self._storage_of_url[key] = found
        return found

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


DEFAULT_PORTS = {"https": 443, "davs": 443, "http": 80, "dav": 80, "root": 1094, "xroot": 1094, "gsiftp": 2811}


@lru_cache(maxsize=8192)
def _authority(prefix: str) -> tuple[str, int | None]:
    try:
        parts = urlsplit(prefix)
        return (parts.hostname or "").lower(), parts.port or DEFAULT_PORTS.get(parts.scheme)
    except ValueError:
        return "", None


def url_authority(url: str) -> tuple[str, int | None]:
    """(host, port) of a storage URL, the scheme's default port when none is written."""
    start = url.find("//")
    end = url.find("/", start + 2) if start >= 0 else -1
    return _authority(url if end < 0 else url[:end])
