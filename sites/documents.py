"""The sites document: the registry as a file that coordinators keep (JSON, or the same in YAML).

Loading turns text into a mapping; validation checks the whole mapping, collects every problem with its place
(`sites[0].endpoints[1].url`) and gives back typed entries for `sites.services.sites_import`. Rates are in bytes
per second and sizes in bytes.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.db.models.functions import Lower

from common.documents import DocumentError, DocumentValidator, document_load, is_number, type_name

from .choices import EndpointKind, Implementation, TpcMode
from .models import Experiment, NetworkHost, StorageEndpoint
from .selectors import door_of
from .validators import endpoint_url_problem

DOCUMENT_KEYS = ("experiments", "sites")
EXPERIMENT_KEYS = ("name",)
SITE_KEYS = (
    "name",
    "tier",
    "country",
    "experiments",
    "contacts",
    "latitude",
    "longitude",
    "capacity",
    "endpoints",
    "network_hosts",
)
SITE_REQUIRED_KEYS = ("name", "tier", "country")
ENDPOINT_KEYS = ("url", "implementation", "kind", "tpc_modes", "rse", "experiments")
CAPACITY_FLOAT_KEYS = ("network_rate", "tape_drive_rate")
# The largest value each integer column holds (PositiveIntegerField, PositiveBigIntegerField).
CAPACITY_INTEGER_KEYS = {
    "tape_drives": 2**31 - 1,
    "staging_request_limit": 2**31 - 1,
    "disk_size": 2**63 - 1,
    "tape_size": 2**63 - 1,
}
CAPACITY_KEYS = (*CAPACITY_FLOAT_KEYS, *CAPACITY_INTEGER_KEYS)

# Column lengths of the models, so an over-long value is a document error rather than a database error.
EXPERIMENT_NAME_LENGTH = 64
SITE_NAME_LENGTH = 64
URL_LENGTH = 512
ADDRESS_LENGTH = 255
RSE_LENGTH = 128

_COUNTRY = re.compile(r"^[A-Z]{2}$")
_NETWORK_HOST = re.compile(r"^(?P<host>[A-Za-z0-9._-]+|\[[0-9A-Fa-f:.]+\])(?::(?P<port>[0-9]{1,5}))?$")
_DOCUMENT_SHAPE = " and ".join(DOCUMENT_KEYS)
_IMPLEMENTATIONS = {value.lower(): value for value in Implementation.values}


class SitesDocumentError(DocumentError):
    """A sites document that cannot be imported. `errors` lists every problem as
    `{"place": "sites[0].endpoints[1].url", "error": "reason"}`; the place `document` is the whole document."""

    kind = "sites document"


@dataclass(frozen=True)
class CapacityEntry:
    """A site's capacity as the document gives it; None is unknown."""

    network_rate: float | None = None
    tape_drives: int | None = None
    tape_drive_rate: float | None = None
    staging_request_limit: int | None = None
    disk_size: int | None = None
    tape_size: int | None = None


@dataclass(frozen=True)
class EndpointEntry:
    """A storage endpoint as the document gives it, with the implementation spelled canonically."""

    url: str
    implementation: str = Implementation.OTHER.value
    kind: str = EndpointKind.DISK.value
    tpc_modes: list[str] = field(default_factory=list)
    rse_names: list[str] = field(default_factory=list)
    # The experiments it serves (names as written, each among its site's); empty: all of its site's.
    experiments: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class SiteEntry:
    """A site as the document gives it. `experiments` are names as written (matched case-insensitively)."""

    name: str
    tier: int
    country: str
    experiments: list[str] = field(default_factory=list)
    contacts: list[str] = field(default_factory=list)
    latitude: float | None = None
    longitude: float | None = None
    capacity: CapacityEntry | None = None
    endpoints: list[EndpointEntry] = field(default_factory=list)
    network_hosts: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class SitesDocument:
    """A validated sites document."""

    experiments: list[str]
    sites: list[SiteEntry]


def sites_document_load(*, text: str | bytes, content_type: str | None = None) -> dict[str, Any]:
    """Parse a sites document. A content type naming JSON or YAML decides the format; otherwise JSON is tried
    first and YAML (a superset) second. Raises SitesDocumentError when the text is not a mapping."""
    return document_load(
        text=text, content_type=content_type, error=SitesDocumentError, shape=f"a mapping with {_DOCUMENT_SHAPE}"
    )


def sites_document_validate(*, document: Any) -> SitesDocument:
    """Check a whole sites document against itself and the registry, and return it as typed entries.

    Raises SitesDocumentError listing every problem found, in document order. Reads the database (existing
    experiments, endpoint URLs and network hosts) in a fixed number of queries.
    """
    return _Validator().validate(document)


class _Validator(DocumentValidator):
    """One pass over a document. Checks that need the database are deferred and run together at the end,
    each keeping its position so that the errors come out in document order."""

    error = SitesDocumentError
    yaml_exponent_example = "1.0e15"

    def __init__(self) -> None:
        super().__init__()
        self._experiment_references: list[tuple[int, str, str]] = []  # (order, place, name)
        self._urls: list[tuple[int, str, str, str]] = []  # (order, place, url, site name)
        self._addresses: list[tuple[int, str, str, str]] = []  # (order, place, address, site name)
        self._rses: list[tuple[int, str, str, str]] = []  # (order, place, RSE name, site name)

    def validate(self, document: Any) -> SitesDocument:
        document = self.document_mapping(document, f"a mapping with {_DOCUMENT_SHAPE}")
        self.unknown_keys(document, DOCUMENT_KEYS, "")
        experiments = self._experiments(document.get("experiments", []))
        sites = self._sites(document.get("sites", []))
        self._check_against_registry(declared={name.lower() for name in experiments})
        self.raise_if_errors()
        return SitesDocument(experiments=experiments, sites=sites)

    def _strings(
        self,
        value: Any,
        place: str,
        *,
        max_length: int | None = None,
        ignore_case: bool = False,
        check: Callable[[str], str | None] | None = None,
    ) -> list[tuple[str, str]]:
        """A list of non-empty strings without repeats, each passing `check` (which gives the reason when it
        fails); returns the good ones with their places."""
        result: list[tuple[str, str]] = []
        first_place: dict[str, str] = {}
        for index, item in enumerate(self.list_value(value, place)):
            item_place = f"{place}[{index}]"
            key = item.lower() if ignore_case and isinstance(item, str) else item
            if not isinstance(item, str) or not item.strip():
                self.add(item_place, "must be a non-empty string")
            elif max_length is not None and len(item) > max_length:
                self.add(item_place, f"longer than {max_length} characters")
            elif key in first_place:
                case = " (ignoring case)" if ignore_case else ""
                self.add(item_place, f"{item!r} repeats {first_place[key]}{case}")
            elif check is not None and (problem := check(item)) is not None:
                self.add(item_place, problem)
            else:
                first_place[key] = item_place
                result.append((item_place, item))
        return result

    def _experiments(self, value: Any) -> list[str]:
        names: list[str] = []
        first_place: dict[str, str] = {}
        for index, entry in enumerate(self.list_value(value, "experiments")):
            place = f"experiments[{index}]"
            mapping = self.mapping_value(entry, place)
            if mapping is None:
                continue
            self.unknown_keys(mapping, EXPERIMENT_KEYS, place)
            if "name" not in mapping:
                self.add(f"{place}.name", "required")
                continue
            name = self.name_value(mapping["name"], f"{place}.name", EXPERIMENT_NAME_LENGTH)
            if name is None:
                continue
            if name.lower() in first_place:
                self.add(f"{place}.name", f"{name!r} repeats {first_place[name.lower()]} (names ignore case)")
                continue
            first_place[name.lower()] = f"{place}.name"
            names.append(name)
        return names

    def _sites(self, value: Any) -> list[SiteEntry]:
        sites: list[SiteEntry] = []
        first_place: dict[str, str] = {}
        for index, entry in enumerate(self.list_value(value, "sites")):
            place = f"sites[{index}]"
            mapping = self.mapping_value(entry, place)
            if mapping is None:
                continue
            self.unknown_keys(mapping, SITE_KEYS, place)
            self.required(mapping, SITE_REQUIRED_KEYS, place)
            name = None
            if "name" in mapping:
                name = self.name_value(mapping["name"], f"{place}.name", SITE_NAME_LENGTH)
                if name is not None and name in first_place:
                    self.add(f"{place}.name", f"{name!r} repeats {first_place[name]}")
                elif name is not None:
                    first_place[name] = f"{place}.name"
            site = self._site(mapping, place, name or "")
            if site is not None and name is not None:
                sites.append(site)
        return sites

    def _site(self, mapping: dict[Any, Any], place: str, name: str) -> SiteEntry | None:
        errors_before = len(self._errors)
        tier = mapping.get("tier")
        if "tier" in mapping and (not isinstance(tier, int) or isinstance(tier, bool) or not 0 <= tier <= 3):
            self.add(f"{place}.tier", f"must be an integer from 0 to 3, not {tier!r}")
        country = mapping.get("country")
        if "country" in mapping and (not isinstance(country, str) or not _COUNTRY.match(country)):
            self.add(f"{place}.country", f"must be a two-letter upper-case ISO 3166-1 code such as IT, not {country!r}")
        experiments = self._strings(mapping.get("experiments"), f"{place}.experiments", ignore_case=True)
        for item_place, experiment in experiments:
            self._experiment_references.append((self.position(), item_place, experiment))
        contacts = self._strings(mapping.get("contacts"), f"{place}.contacts")
        latitude = self._coordinate(mapping.get("latitude"), f"{place}.latitude", 90)
        longitude = self._coordinate(mapping.get("longitude"), f"{place}.longitude", 180)
        capacity = None
        if mapping.get("capacity") is not None:
            capacity = self._capacity(mapping["capacity"], f"{place}.capacity")
        endpoints = [
            endpoint
            for index, entry in enumerate(self.list_value(mapping.get("endpoints"), f"{place}.endpoints"))
            if (endpoint := self._endpoint(entry, f"{place}.endpoints[{index}]", name, experiments)) is not None
        ]
        network_hosts = self._network_hosts(mapping.get("network_hosts"), f"{place}.network_hosts", name)
        if len(self._errors) != errors_before:
            return None
        return SiteEntry(
            name=name,
            tier=tier,  # type: ignore[arg-type]  # required and checked above
            country=country,  # type: ignore[arg-type]
            experiments=[experiment for _, experiment in experiments],
            contacts=[contact for _, contact in contacts],
            latitude=latitude,
            longitude=longitude,
            capacity=capacity,
            endpoints=endpoints,
            network_hosts=network_hosts,
        )

    def _coordinate(self, value: Any, place: str, limit: int) -> float | None:
        if value is None:
            return None
        if not is_number(value) or not -limit <= value <= limit:
            self.add(place, f"must be a number from {-limit} to {limit}, not {value!r}")
            return None
        return float(value)

    def _capacity(self, value: Any, place: str) -> CapacityEntry | None:
        mapping = self.mapping_value(value, place)
        if mapping is None:
            return None
        self.unknown_keys(mapping, CAPACITY_KEYS, place)
        values: dict[str, Any] = {}
        for key in CAPACITY_FLOAT_KEYS:
            number = mapping.get(key)
            if number is None:
                continue
            if not is_number(number) or number < 0:
                self.add(f"{place}.{key}", f"must be a non-negative number, not {number!r}{self.yaml_hint(number)}")
            else:
                values[key] = float(number)
        for key, maximum in CAPACITY_INTEGER_KEYS.items():
            number = mapping.get(key)
            if number is None:
                continue
            # 1e15 is a natural way to write a size: an integral float counts as an integer.
            if not is_number(number) or number < 0 or number != int(number) or number > maximum:
                self.add(
                    f"{place}.{key}",
                    f"must be a non-negative integer up to {maximum}, not {number!r}{self.yaml_hint(number)}",
                )
            else:
                values[key] = int(number)
        return CapacityEntry(**values)

    def _endpoint(
        self, entry: Any, place: str, site_name: str, site_experiments: list[tuple[str, str]]
    ) -> EndpointEntry | None:
        mapping = self.mapping_value(entry, place)
        if mapping is None:
            return None
        self.unknown_keys(mapping, ENDPOINT_KEYS, place)
        errors_before = len(self._errors)
        url = mapping.get("url")
        if "url" not in mapping:
            self.add(f"{place}.url", "required")
        elif not isinstance(url, str) or not url:
            self.add(f"{place}.url", f"must be a non-empty string, not {type_name(url)}")
        elif len(url) > URL_LENGTH or url != url.strip():
            self.add(f"{place}.url", f"must be at most {URL_LENGTH} characters without surrounding spaces")
        elif (problem := endpoint_url_problem(url)) is not None:
            self.add(f"{place}.url", problem)
        else:
            self._urls.append((self.position(), f"{place}.url", url, site_name))
        implementation = Implementation.OTHER.value
        if mapping.get("implementation") is not None:
            given = mapping["implementation"]
            if not isinstance(given, str) or given.lower() not in _IMPLEMENTATIONS:
                self.add(f"{place}.implementation", f"must be one of {', '.join(Implementation.values)}, not {given!r}")
            else:
                implementation = _IMPLEMENTATIONS[given.lower()]
        kind: str = EndpointKind.DISK.value
        if mapping.get("kind") is not None:
            if mapping["kind"] not in EndpointKind.values:
                self.add(f"{place}.kind", f"must be one of {', '.join(EndpointKind.values)}, not {mapping['kind']!r}")
            else:
                kind = mapping["kind"]
        tpc_modes = self._strings(
            mapping.get("tpc_modes"),
            f"{place}.tpc_modes",
            check=lambda mode: None if mode in TpcMode.values else f"must be one of {', '.join(TpcMode.values)}",
        )
        rse_names = self._strings(mapping.get("rse"), f"{place}.rse", max_length=RSE_LENGTH)
        self._rses.extend((self.position(), rse_place, rse, site_name) for rse_place, rse in rse_names)
        experiments = self._endpoint_experiments(mapping.get("experiments"), f"{place}.experiments", site_experiments)
        if len(self._errors) != errors_before or not isinstance(url, str):
            return None
        return EndpointEntry(
            url=url,
            implementation=implementation,
            kind=kind,
            tpc_modes=[mode for _, mode in tpc_modes],
            rse_names=[rse for _, rse in rse_names],
            experiments=experiments,
        )

    def _endpoint_experiments(self, value: Any, place: str, site_experiments: list[tuple[str, str]]) -> list[str]:
        """An endpoint serves some of its site's experiments: a name the site does not list is an error (the
        site's list is checked against the registry where it is given)."""
        served = {name.lower(): name for _, name in site_experiments}
        listed = ", ".join(served.values()) or "none"

        def problem(name: str) -> str | None:
            if name.lower() in served:
                return None
            return f"no experiment named {name!r} among this site's experiments ({listed}): add it to the site's"

        return [served[name.lower()] for _, name in self._strings(value, place, ignore_case=True, check=problem)]

    def _network_hosts(self, value: Any, place: str, site_name: str) -> list[str]:
        addresses = self._strings(value, place, max_length=ADDRESS_LENGTH, check=_network_host_problem)
        for item_place, address in addresses:
            self._addresses.append((self.position(), item_place, address, site_name))
        return [address for _, address in addresses]

    def _check_against_registry(self, *, declared: set[str]) -> None:
        """Uniqueness across the document, then the checks that read the database (three queries at most)."""
        for entries, noun in ((self._urls, "URL"), (self._addresses, "address")):
            first_place: dict[str, str] = {}
            for order, place, value, _ in entries:
                if value in first_place:
                    self.add_at(order, place, f"this {noun} repeats {first_place[value]}")
                else:
                    first_place[value] = place
        undeclared = {name.lower() for _, _, name in self._experiment_references} - declared
        if undeclared:
            known = set(
                Experiment.objects.annotate(lower_name=Lower("name"))
                .filter(lower_name__in=undeclared)
                .values_list("lower_name", flat=True)
            )
            for order, place, name in self._experiment_references:
                if name.lower() not in declared and name.lower() not in known:
                    reason = f"experiment {name!r} is neither in the document's experiments nor in the registry"
                    self.add_at(order, place, reason)
        if self._urls:
            owners = dict(
                StorageEndpoint.objects.filter(url__in={url for _, _, url, _ in self._urls}).values_list(
                    "url", "site__name"
                )
            )
            for order, place, url, site_name in self._urls:
                owner = owners.get(url)
                if owner is not None and owner != site_name:
                    self.add_at(order, place, f"this URL belongs to site {owner!r}")
        if self._addresses:
            owners = dict(
                NetworkHost.objects.filter(address__in={address for _, _, address, _ in self._addresses}).values_list(
                    "address", "site__name"
                )
            )
            for order, place, address, site_name in self._addresses:
                owner = owners.get(address)
                if owner is not None and owner != site_name:
                    self.add_at(order, place, f"this network host belongs to site {owner!r}")
        self._check_doors_and_rses()

    def _check_doors_and_rses(self) -> None:
        """A storage door (scheme://host:port) and an RSE name belong to one site, in the document and against the
        registry's other sites: records are counted for the site that owns them (two queries)."""
        door_site: dict[tuple[str, str, int | None], tuple[str, str, str]] = {}
        for order, place, url, site_name in self._urls:
            door = door_of(url)
            if door in door_site and door_site[door][0] != site_name and door_site[door][2] != url:
                owner, first, _ = door_site[door]  # (a URL repeated is said above, once)
                self.add_at(order, place, f"this storage door is {owner}'s ({first}): a door has one site")
            door_site.setdefault(door, (site_name, place, url))
        rse_site: dict[str, tuple[str, str]] = {}
        for order, place, rse, site_name in self._rses:
            if rse in rse_site and rse_site[rse][0] != site_name:
                owner, first = rse_site[rse]
                self.add_at(order, place, f"RSE {rse} is {owner}'s ({first}): an RSE has one site")
            rse_site.setdefault(rse, (site_name, place))
        if door_site:
            hosts = {host for _, host, _ in door_site}
            for owner, url in StorageEndpoint.objects.filter(host__in=hosts).values_list("site__name", "url"):
                door = door_of(url)
                for order, place, given, site_name in self._urls:
                    if door_of(given) == door and site_name != owner and given != url:
                        reason = f"this storage door belongs to site {owner!r} ({url}): a door has one site"
                        self.add_at(order, place, reason)
        if rse_site:
            registered = StorageEndpoint.objects.filter(rse_names__overlap=list(rse_site)).values_list(
                "rse_names", "site__name"
            )
            for names, owner in registered:
                for order, place, rse, site_name in self._rses:
                    if rse in names and site_name != owner:
                        self.add_at(order, place, f"RSE {rse} belongs to site {owner!r}")


def _network_host_problem(address: str) -> str | None:
    match = _NETWORK_HOST.match(address)
    if match is None or (match["port"] is not None and not 0 < int(match["port"]) < 65536):
        return f"must be host or host:port, not {address!r}"
    return None


__all__ = [
    "CapacityEntry",
    "EndpointEntry",
    "SiteEntry",
    "SitesDocument",
    "SitesDocumentError",
    "sites_document_load",
    "sites_document_validate",
]
