"""From a storage URL to the endpoint and site it names: the one matcher of the portal.

The rules, in order:

1. An RSE name, when the caller has one (a DDM record's `src_rse`), decides first: its endpoint and site.
2. The URL's door is its host (any case) and port: as written, else its scheme's default (DEFAULT_PORTS), so that
   `root://h//data` and `root://h:1094//data` are one door. An endpoint's door is read from its URL the same way.
3. Among the endpoints at that door whose scheme is the URL's (or an alias of it: davs and https, root and xroot),
   the one whose path is the longest prefix of the URL's path, by whole segments (slashes at either end ignored,
   so `root://h//data/` is the prefix of `root://h:1094//data/f` and `/data` is not of `/database/f`).
4. Else the door's site, when all its endpoints are one site's (a door such as StoRM's :8444 speaks srm and davs),
   with the door's endpoint when it has one; else, on another port of the same host, the host's site when all of
   its endpoints are one site's, with the host's endpoint when it has one. A host several sites share (a testbed
   on one machine) decides nothing.

With an experiment, the endpoints that do not serve it are passed over (an endpoint serves the experiments it names,
or naming none, all of its site's: `experiments_served`); the site is still the door's or the host's.

`EndpointIndex` is the registry's endpoints in memory with the experiments they serve, read once (one query):
ingestion matches a whole batch with one, pages a whole list of runs.
`storage_for_url` and `site_for_url` read only the URL's host's endpoints, for one URL.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, NamedTuple
from urllib.parse import urlsplit

from django.contrib.postgres.aggregates import ArrayAgg
from django.db.models import Q

from .models import Site, StorageEndpoint

# The port a scheme's URL means when it writes none (gfal2's and the servers' defaults).
DEFAULT_PORTS = {
    "root": 1094,
    "xroot": 1094,
    "roots": 1094,
    "xroots": 1094,
    "davs": 443,
    "https": 443,
    "dav": 80,
    "http": 80,
    "gsiftp": 2811,
    "srm": 8443,
}
# Schemes that name the same protocol: a URL of one matches an endpoint registered with the other.
SCHEME_ALIASES = {"davs": "https", "dav": "http", "xroot": "root", "xroots": "roots"}


class EndpointMatch(NamedTuple):
    """What a URL matched: a site, and the endpoint when one is decided."""

    site_id: int
    endpoint_id: int | None


class UrlParts(NamedTuple):
    """A storage URL as the matcher reads it: scheme (lower case, aliases as one), host (lower case), port (the
    scheme's default when none is written) and the path without its slashes at either end."""

    scheme: str
    host: str
    port: int | None
    path: str


@lru_cache(maxsize=8192)
def _authority(prefix: str) -> tuple[str, str, int | None]:
    """(scheme, host, port) of `scheme://authority`; a batch names a few of them thousands of times."""
    try:
        parts = urlsplit(prefix)
        scheme = parts.scheme.lower()
        port = parts.port or DEFAULT_PORTS.get(scheme)
        return SCHEME_ALIASES.get(scheme, scheme), (parts.hostname or "").lower(), port
    except ValueError:  # a port that is not a number
        return "", "", None


def _path_start(url: str) -> int:
    """Where the path of a URL starts (-1: it has none); what comes before is `scheme://authority`."""
    start = url.find("//")
    return url.find("/", start + 2) if start >= 0 else -1


def _path(url: str, start: int) -> str:
    """The URL's path from `start`, without its query, fragment and slashes at either end."""
    if start < 0:
        return ""
    path = url[start:]
    for mark in "?#":
        if mark in path:
            path = path[: path.index(mark)]
    return path.strip("/")


def url_parts(url: str) -> UrlParts:
    """The scheme, host, port and path the matcher reads from a storage URL (its query and fragment dropped)."""
    start = _path_start(url)
    return UrlParts(*_authority(url if start < 0 else url[:start]), _path(url, start))


def url_host(url: str) -> str:
    """The host name of a storage URL, lower case ("" when it has none)."""
    return url_parts(url).host


def url_door(url: str) -> tuple[str, str, int | None]:
    """A storage URL's door as a sites document names it: (scheme, host, port with the scheme's default)."""
    scheme, host, port, _ = url_parts(url)
    return scheme, host, port


def experiments_served(*, named: Iterable[int] | None, of_site: Iterable[int] | None) -> frozenset[int]:
    """The experiments an endpoint serves: those it names, or naming none, all of its site's (`of_site`)."""
    return frozenset(named or of_site or ())


def endpoint_serves(*, endpoint: StorageEndpoint, experiment_id: int) -> bool:
    """Whether an endpoint row serves the experiment (prefetch `experiments` and `site__experiments` for many)."""
    return experiment_id in experiments_served(
        named=[experiment.pk for experiment in endpoint.experiments.all()],
        of_site=[experiment.pk for experiment in endpoint.site.experiments.all()],
    )


@dataclass(frozen=True, slots=True)
class _Entry:
    pk: int
    site_id: int
    scheme: str
    path: str  # without slashes at either end
    match: EndpointMatch
    experiments: frozenset[int]  # those it serves (experiments_served)

    def holds(self, path: str) -> bool:
        """Whether this endpoint's path is a prefix of `path` by whole segments."""
        return not self.path or path == self.path or (path.startswith(self.path) and path[len(self.path)] == "/")


# (pk, site id, URL, RSE names, the experiments it names, its site's experiments): what the index is made of.
_EndpointRow = tuple[int, int, str, Iterable[str], Iterable[int] | None, Iterable[int] | None]

# A batch names a few doors thousands of times: what each door gives (for an experiment) is kept, up to this many
# doors, as a stream of records could name many unknown ones.
DOOR_MEMO_SIZE = 4096


class EndpointIndex:
    """The registry's storage endpoints in memory, matched by the rules of this module. `rows`: also the endpoint
    rows with their sites and capacities, for `storage` and `site`."""

    def __init__(self, endpoints: Iterable[_EndpointRow], rows: dict[int, Any]) -> None:
        self._doors: dict[tuple[str, int | None], list[_Entry]] = defaultdict(list)
        self._hosts: dict[str, list[_Entry]] = defaultdict(list)
        self._rses: dict[str, EndpointMatch] = {}
        self._rows = rows
        self._sites = {row.site_id: row.site for row in rows.values()}
        self._door_memo: dict[tuple[str, int | None, int | None], tuple[list[_Entry], EndpointMatch | None]] = {}
        for pk, site_id, url, rses, named, of_site in endpoints:
            scheme, host, port, path = url_parts(url)
            served = experiments_served(named=named, of_site=of_site)
            entry = _Entry(pk, site_id, scheme, path, EndpointMatch(site_id, pk), served)
            self._doors[(host, port)].append(entry)
            self._hosts[host].append(entry)
            for rse in rses:
                self._rses[rse.upper()] = EndpointMatch(site_id, pk)
        for entries in self._doors.values():
            entries.sort(key=lambda entry: len(entry.path), reverse=True)  # the longest prefix is met first

    @classmethod
    def load(cls, *, host: str | None = None, rows: bool = False) -> EndpointIndex:
        """The registry's endpoints (only `host`'s when given: all that can match a URL of that host) with the
        experiments they and their sites serve, in one query."""
        endpoints = StorageEndpoint.objects.order_by("url").annotate(  # ties go the same way whatever is loaded
            named=ArrayAgg("experiments", distinct=True, filter=Q(experiments__isnull=False)),
            of_site=ArrayAgg("site__experiments", distinct=True, filter=Q(site__experiments__isnull=False)),
        )
        if host is not None:
            endpoints = endpoints.filter(host=host.lower())
        if not rows:
            return cls(endpoints.values_list("pk", "site_id", "url", "rse_names", "named", "of_site"), {})
        loaded = {endpoint.pk: endpoint for endpoint in endpoints.select_related("site", "site__capacity")}
        return cls(((e.pk, e.site_id, e.url, e.rse_names, e.named, e.of_site) for e in loaded.values()), loaded)

    @property
    def hosts(self) -> set[str]:
        """The hosts of the registered endpoints."""
        return set(self._hosts)

    def match(self, url: str, *, experiment_id: int | None = None, rse: Any = None) -> EndpointMatch | None:
        """The site and endpoint of a storage URL (the module's rules), or None."""
        if isinstance(rse, str) and rse:
            found = self._rses.get(rse.upper())
            if found is not None:
                return found
        start = _path_start(url)
        scheme, host, port = _authority(url if start < 0 else url[:start])
        if not scheme:  # not a URL, or its port is not a number
            return None
        serving, otherwise = self._door(host, port, experiment_id)
        if serving:
            path = _path(url, start)
            for entry in serving:  # the longest path first
                if entry.scheme == scheme and entry.holds(path):
                    return entry.match
        return otherwise

    def _door(
        self, host: str, port: int | None, experiment_id: int | None
    ) -> tuple[list[_Entry], EndpointMatch | None]:
        """The endpoints of a door that serve the experiment, and what a URL there matches when no path does."""
        key = (host, port, experiment_id)
        found = self._door_memo.get(key)
        if found is None:
            door = self._doors.get((host, port))
            if door is None:
                found = ([], self.host_match(host, experiment_id=experiment_id))
            else:
                serving = self._serving(door, experiment_id)
                found = (serving, _only_site(door, serving))
            if len(self._door_memo) >= DOOR_MEMO_SIZE:
                self._door_memo.clear()
            self._door_memo[key] = found
        return found

    def host_match(self, host: str, *, experiment_id: int | None = None) -> EndpointMatch | None:
        """The site of a host whose endpoints are all one site's, with its endpoint when it has one."""
        entries = self._hosts.get(host.lower())
        return _only_site(entries, self._serving(entries, experiment_id)) if entries else None

    def site(self, url: str, *, experiment_id: int | None = None) -> Site | None:
        """The site a URL matched, with its capacity (an index loaded with rows)."""
        return self.storage(url, experiment_id=experiment_id)[0]

    def storage(self, url: str, *, experiment_id: int | None = None) -> tuple[Site | None, StorageEndpoint | None]:
        """The site and endpoint rows a URL matched (an index loaded with rows)."""
        found = self.match(url, experiment_id=experiment_id)
        if found is None:
            return None, None
        endpoint = self._rows[found.endpoint_id] if found.endpoint_id is not None else None
        return self._sites[found.site_id], endpoint

    @staticmethod
    def _serving(entries: list[_Entry], experiment_id: int | None) -> list[_Entry]:
        if experiment_id is None:
            return entries
        return [entry for entry in entries if experiment_id in entry.experiments]


def _only_site(entries: list[_Entry], serving: list[_Entry]) -> EndpointMatch | None:
    """The one site of these endpoints, with the one endpoint among them that serves, when there is one."""
    site_id = entries[0].site_id
    if any(entry.site_id != site_id for entry in entries):
        return None
    return EndpointMatch(site_id, serving[0].pk if len(serving) == 1 else None)


def site_matcher() -> Callable[[str], Site | None]:
    """site_for_url for many URLs: the endpoints (with site and capacity) read once, matched in memory."""
    return EndpointIndex.load(rows=True).site


def site_for_url(url: str, *, experiment_id: int | None = None) -> Site | None:
    """The site (with its capacity) of one storage URL, reading only its host's endpoints."""
    return storage_for_url(url, experiment_id=experiment_id)[0]


def storage_for_url(url: str, *, experiment_id: int | None = None) -> tuple[Site | None, StorageEndpoint | None]:
    """The site and endpoint of one storage URL (the module's rules), reading only its host's endpoints."""
    return EndpointIndex.load(host=url_host(url), rows=True).storage(url, experiment_id=experiment_id)
