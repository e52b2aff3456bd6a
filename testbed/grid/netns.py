"""The testbed's sites as places with a network of their own (`testbed up --network namespaces`).

Each site gets a Linux network namespace with one interface (`eth0`, the far end of a veth pair), its own address
on a private /24 and its own MTU; the host ends of the pairs join a bridge that holds the portal's address (the
address at which the sites reach the host, TESTBED_PORTAL_ADDRESS). A link between two sites can have a capacity:
an htb class on each site's `eth0` for packets to the other site's address (shaped where they leave, each way).
Nothing leaves the machine: the bridge has no physical port, and the namespaces are the testbed's own.

An MTU that differs between two sites is a real mismatch: the bridge forwards frames at layer 2 and drops, without
a word, a frame larger than the MTU of the port it leaves by (as a switch does with jumbo frames it does not take),
so packets of 9000 bytes from a 9000 site never reach a 1500 site, while TCP, whose segments both ends agree on,
still gets through. Measured on these machines: `tc` htb and tbf work, netem and fq do not (no delay or loss).

Plain Python, root only (`ip netns`, `tc`).
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Every site of the testbed, in the order of their addresses (.10, .11, ...): key, name.
NAMESPACED_SITES = (
    ("t0", "TB-T0"),
    ("t1a", "TB-T1-A"),
    ("t1b", "TB-T1-B"),
    ("tape", "TB-TAPE"),
    ("webdav", "TB-WEBDAV"),
    ("origin", "TB-ORIGIN"),
    ("xcache", "TB-XCACHE"),
)
# The default layout: TB-T1-B at 1500 (the JUNO challenge's mismatch), every other site jumbo frames; between TB-T0
# and TB-T1-A 1 Gb/s each way.
DEFAULT_MTU = 9000
DEFAULT_MTUS = {"TB-T1-B": 1500}
DEFAULT_LINKS = ((("TB-T0", "TB-T1-A"), 1e9),)
FIRST_SITE_HOST = 10  # site addresses: .10, .11, ...; the portal (the bridge) is .1
HTB_QUANTUM = 60000  # bytes a class may send per round: above the largest MTU (htb's own default is far larger)


class NamespacesUnavailable(RuntimeError):
    """Network namespaces cannot be made here (not root, no `ip`, or the kernel refused)."""


@dataclass(frozen=True)
class SitePlace:
    """One site's place: its namespace, the host end of its veth pair, its address and MTU."""

    key: str
    name: str
    namespace: str
    host_veth: str
    address: str
    mtu: int


@dataclass(frozen=True)
class LinkCapacity:
    """A capacity between two sites, each way, in bits per second."""

    ends: tuple[str, str]
    bits_per_second: float


@dataclass(frozen=True)
class NetworkLayout:
    """The sites' places, the bridge between them and the capacities of their links."""

    subnet: str
    bridge: str
    portal_address: str
    sites: tuple[SitePlace, ...]
    links: tuple[LinkCapacity, ...] = field(default=())

    def site(self, name_or_key: str) -> SitePlace:
        """A site by its name (TB-T1-A, any case) or key (t1a)."""
        for place in self.sites:
            if name_or_key.lower() in (place.key, place.name.lower()):
                return place
        known = ", ".join(place.name for place in self.sites)
        raise KeyError(f"no testbed site {name_or_key!r} (sites: {known})")

    def capacities_of(self, name: str) -> list[tuple[str, float]]:
        """(the other end, bits per second) of every link of the site `name` that has a capacity."""
        result = []
        for link in self.links:
            if name in link.ends:
                other = link.ends[1] if link.ends[0] == name else link.ends[0]
                result.append((other, link.bits_per_second))
        return result

    @property
    def addresses(self) -> list[str]:
        return [self.portal_address, *(place.address for place in self.sites)]

    def to_dict(self) -> dict[str, Any]:
        return {
            "subnet": self.subnet,
            "bridge": self.bridge,
            "portal_address": self.portal_address,
            "sites": [place.__dict__ for place in self.sites],
            "links": [{"ends": list(link.ends), "bits_per_second": link.bits_per_second} for link in self.links],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> NetworkLayout:
        return cls(
            subnet=data["subnet"],
            bridge=data["bridge"],
            portal_address=data["portal_address"],
            sites=tuple(SitePlace(**place) for place in data["sites"]),
            links=tuple(LinkCapacity(tuple(link["ends"]), float(link["bits_per_second"])) for link in data["links"]),
        )


def default_subnet(base_port: int) -> str:
    """A private /24 of the testbed's own, from its base port (10.<high byte>.<low byte>.0/24): two testbeds on
    different base ports never share addresses."""
    return f"10.{(base_port >> 8) & 255}.{base_port & 255}.0/24"


def default_layout(base_port: int, subnet: str = "", shape: str = "") -> NetworkLayout:
    """The layout of a testbed on base_port: names with the base port in them (interface names stay within Linux's
    15 characters), addresses from subnet (default_subnet when empty), and the default MTUs and capacities changed
    by shape (TESTBED_NETNS_LAYOUT, see layout_shape)."""
    network = ipaddress.ip_network(subnet or default_subnet(base_port))
    if network.version != 4 or not network.is_private or network.num_addresses < 32:
        raise ValueError(f"the testbed's subnet must be a private IPv4 network of at least 32 addresses: {network}")
    mtus, links = layout_shape(shape)
    hosts = list(network.hosts())
    prefix = f"tb{base_port}"
    sites = tuple(
        SitePlace(
            key=key,
            name=name,
            namespace=f"{prefix}-{key}",
            host_veth=f"{prefix}{key}",
            address=str(hosts[FIRST_SITE_HOST - 1 + index]),
            mtu=mtus.get(name, DEFAULT_MTU),
        )
        for index, (key, name) in enumerate(NAMESPACED_SITES)
    )
    return NetworkLayout(str(network), f"{prefix}br", str(hosts[0]), sites, links)


def layout_shape(text: str) -> tuple[dict[str, int], tuple[LinkCapacity, ...]]:
    """The sites' MTUs and the links' capacities: the defaults, changed by a JSON document such as
    `{"mtu": {"TB-T1-A": 1500}, "links": [["TB-T0", "TB-T1-B", 2e8]]}` (an MTU per site name, from 576 to 9000;
    "links", when given, replaces the default links: two site names and bits per second)."""
    mtus, links = dict(DEFAULT_MTUS), tuple(LinkCapacity(ends, rate) for ends, rate in DEFAULT_LINKS)
    if not text.strip():
        return mtus, links
    names = {name for _, name in NAMESPACED_SITES}
    try:
        shape = json.loads(text)
        for name, mtu in shape.get("mtu", {}).items():
            if name not in names or not isinstance(mtu, int) or not 576 <= mtu <= 9000:
                raise ValueError(f"mtu: {name!r} {mtu!r} (a testbed site and a whole number from 576 to 9000)")
            mtus[name] = mtu
        if "links" in shape:
            links = tuple(_link(entry, names) for entry in shape["links"])
    except (ValueError, AttributeError, TypeError) as exc:
        raise ValueError(f"TESTBED_NETNS_LAYOUT is not a layout: {exc}") from exc
    return mtus, links


def _link(entry: Any, names: set[str]) -> LinkCapacity:
    first, second, rate = entry
    if first not in names or second not in names or first == second:
        raise ValueError(f"link {entry!r}: two different testbed sites")
    if not isinstance(rate, int | float) or not 1e3 <= rate <= 1e11:
        raise ValueError(f"link {entry!r}: a capacity in bits per second, from 1e3 to 1e11")
    return LinkCapacity((first, second), float(rate))


# --- running ip and tc -----------------------------------------------------------------------------------------


def _run(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    completed = subprocess.run(list(argv), capture_output=True, text=True, timeout=30)
    if check and completed.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed: {completed.stderr.strip() or completed.stdout.strip()}")
    return completed


def namespaces_unavailable() -> str | None:
    """Why network namespaces cannot be made here, or None when they can (tried with a namespace of its own)."""
    if os.geteuid() != 0:
        return "network namespaces need root (ip netns, veth pairs and tc)"
    missing = [tool for tool in ("ip", "tc") if shutil.which(tool) is None]
    if missing:
        return f"{' and '.join(missing)} not installed (Debian: iproute2)"
    probe = f"tbprobe{os.getpid()}"
    made = _run("ip", "netns", "add", probe, check=False)
    if made.returncode != 0:
        return f"the kernel refused a network namespace: {made.stderr.strip()}"
    _run("ip", "netns", "del", probe, check=False)
    return None


def namespace_argv(place: SitePlace, argv: list[str]) -> list[str]:
    """argv run inside the site's namespace, under the site's own host name (a UTS namespace of its own): XRootD's
    third-party copy names a peer by the name its address resolves to (the site's /etc/hosts), and a server by its
    host name, which must be the same. `ip netns exec`, `unshare` and `sh` each exec the next: the PID stays the
    program's own."""
    named = ["unshare", "--uts", "--", "sh", "-c", 'hostname "$0" && exec "$@"', place.namespace, *argv]
    return ["ip", "netns", "exec", place.namespace, *named]


ETC_NETNS = Path("/etc/netns")


def _etc_files_up(layout: NetworkLayout) -> None:
    """Each site's /etc/hosts and /etc/resolv.conf as `ip netns exec` shows them inside its namespace (it binds
    /etc/netns/NAME/FILE over /etc/FILE): every site and the portal by name, and no DNS server (the machine's is
    out of reach from a site: each lookup of an address would wait for its timeout)."""
    hosts = ["127.0.0.1 localhost", "::1 localhost", f"{layout.portal_address} {layout.bridge}-portal"]
    hosts += [f"{place.address} {place.namespace}" for place in layout.sites]
    for place in layout.sites:
        directory = ETC_NETNS / place.namespace
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "hosts").write_text("# the testbed's sites (testbed/grid/netns.py)\n" + "\n".join(hosts) + "\n")
        (directory / "resolv.conf").write_text("# no DNS on the testbed's network: names are in /etc/hosts\n")


def _etc_files_down(layout: NetworkLayout) -> None:
    for place in layout.sites:
        shutil.rmtree(ETC_NETNS / place.namespace, ignore_errors=True)
    with contextlib.suppress(OSError):
        ETC_NETNS.rmdir()  # only when no other namespace keeps files there


def _existing_namespaces() -> set[str]:
    listed = _run("ip", "-j", "netns", "list", check=False).stdout.strip()
    return {entry["name"] for entry in json.loads(listed or "[]")}


def _link_exists(name: str) -> bool:
    return _run("ip", "link", "show", "dev", name, check=False).returncode == 0


def _check_subnet_free(layout: NetworkLayout) -> None:
    """Refuse a subnet that overlaps a route of this machine other than the testbed's own bridge."""
    ours = ipaddress.ip_network(layout.subnet)
    for route in json.loads(_run("ip", "-j", "-4", "route", "show").stdout or "[]"):
        destination = route.get("dst", "")
        if destination in ("default", "") or route.get("dev") == layout.bridge:
            continue
        try:
            theirs = ipaddress.ip_network(destination if "/" in destination else f"{destination}/32", strict=False)
        except ValueError:
            continue
        if ours.overlaps(theirs):
            raise RuntimeError(
                f"the testbed's subnet {ours} overlaps the route to {theirs} (dev {route.get('dev')}) of this "
                "machine: set TESTBED_NETNS_SUBNET to a free private /24"
            )


# --- up and down -----------------------------------------------------------------------------------------------


def network_up(layout: NetworkLayout) -> None:
    """Make the bridge, every site's namespace and veth pair (address, MTU, route to the portal) and the links'
    capacities. Whatever a previous start left half made is removed first."""
    reason = namespaces_unavailable()
    if reason:
        raise NamespacesUnavailable(reason)
    _check_subnet_free(layout)
    if network_leftovers(layout):
        network_down(layout)
    prefix = ipaddress.ip_network(layout.subnet).prefixlen
    try:
        _etc_files_up(layout)
        _run("ip", "link", "add", layout.bridge, "type", "bridge")
        _run("ip", "addr", "add", f"{layout.portal_address}/{prefix}", "dev", layout.bridge)
        for place in layout.sites:
            _site_up(layout, place, prefix)
        # The portal's side takes the largest frames any site sends (the bridge's own MTU, not a port's).
        _run("ip", "link", "set", layout.bridge, "mtu", str(max(place.mtu for place in layout.sites)), "up")
        for place in layout.sites:
            _capacities_up(layout, place)
    except Exception:
        network_down(layout)
        raise


def _site_up(layout: NetworkLayout, place: SitePlace, prefix: int) -> None:
    ns = place.namespace
    _run("ip", "netns", "add", ns)
    _run("ip", "link", "add", place.host_veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
    _run("ip", "link", "set", place.host_veth, "mtu", str(place.mtu), "master", layout.bridge, "up")
    _run("ip", "-n", ns, "link", "set", "lo", "up")
    _run("ip", "-n", ns, "link", "set", "eth0", "mtu", str(place.mtu), "up")
    _run("ip", "-n", ns, "addr", "add", f"{place.address}/{prefix}", "dev", "eth0")
    _run("ip", "-n", ns, "route", "add", "default", "via", layout.portal_address)


def _capacities_up(layout: NetworkLayout, place: SitePlace) -> None:
    """An htb root on the site's eth0 with one class per capped link, for packets to the other end's address;
    every other packet goes through unshaped (htb's direct queue: no default class)."""
    capacities = layout.capacities_of(place.name)
    if not capacities:
        return
    tc = ["tc", "-n", place.namespace]
    _run(*tc, "qdisc", "add", "dev", "eth0", "root", "handle", "1:", "htb")
    for index, (other, bits) in enumerate(capacities, start=10):
        rate = f"{int(bits)}bit"
        _run(
            *tc,
            "class",
            "add",
            "dev",
            "eth0",
            "parent",
            "1:",
            "classid",
            f"1:{index}",
            "htb",
            "rate",
            rate,
            "ceil",
            rate,
            "quantum",
            str(HTB_QUANTUM),
        )
        _run(
            *tc,
            "filter",
            "add",
            "dev",
            "eth0",
            "parent",
            "1:",
            "protocol",
            "ip",
            "prio",
            "1",
            "u32",
            "match",
            "ip",
            "dst",
            f"{layout.site(other).address}/32",
            "flowid",
            f"1:{index}",
        )


def namespace_pids(place: SitePlace) -> list[int]:
    """The processes that live in the site's namespace."""
    listed = _run("ip", "netns", "pids", place.namespace, check=False)
    return [int(pid) for pid in listed.stdout.split() if pid.isdigit()]


def network_down(layout: NetworkLayout, *, timeout: float = 10.0) -> list[str]:
    """Remove every namespace, veth pair (and with them their qdiscs) and the bridge of the layout; what still runs
    in a namespace is killed first (only the testbed's own namespaces are touched). Returns what it removed."""
    removed = []
    present = _existing_namespaces()
    for place in layout.sites:
        if place.namespace in present:
            for pid in namespace_pids(place):
                _kill(pid)
            _run("ip", "netns", "del", place.namespace, check=False)
            removed.append(place.namespace)
        # The host end goes with its peer's namespace, but not at once: delete it so that a next start finds none.
        if _link_exists(place.host_veth):
            _run("ip", "link", "del", place.host_veth, check=False)
            removed.append(place.host_veth)
    if _link_exists(layout.bridge):
        _run("ip", "link", "del", layout.bridge, check=False)
        removed.append(layout.bridge)
    _etc_files_down(layout)
    deadline = time.monotonic() + timeout
    while network_leftovers(layout) and time.monotonic() < deadline:
        time.sleep(0.1)
    return removed


def _kill(pid: int) -> None:
    from common import processes

    processes.stop_pid(pid, timeout=5)


def network_leftovers(layout: NetworkLayout) -> list[str]:
    """The namespaces and interfaces of the layout that exist (none once it is down)."""
    present = _existing_namespaces()
    names = [place.namespace for place in layout.sites if place.namespace in present]
    names += [str(ETC_NETNS / place.namespace) for place in layout.sites if (ETC_NETNS / place.namespace).exists()]
    interfaces = [*(place.host_veth for place in layout.sites), layout.bridge]
    return names + [name for name in interfaces if _link_exists(name)]


# --- what is there now -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PlaceStatus:
    """A site's place as the kernel has it now: its interface's address and MTU, and the htb rates on it."""

    place: SitePlace
    exists: bool
    address: str | None
    mtu: int | None
    shaped: dict[str, float]  # destination address -> bits per second


def place_status(place: SitePlace) -> PlaceStatus:
    if place.namespace not in _existing_namespaces():
        return PlaceStatus(place, False, None, None, {})
    shown = _run("ip", "-n", place.namespace, "-j", "addr", "show", "dev", "eth0", check=False).stdout
    interface = (json.loads(shown or "[]") or [{}])[0]
    addresses = [entry["local"] for entry in interface.get("addr_info", []) if entry.get("family") == "inet"]
    return PlaceStatus(place, True, addresses[0] if addresses else None, interface.get("mtu"), _shaped(place))


def _shaped(place: SitePlace) -> dict[str, float]:
    """The htb classes on the site's eth0 by the destination address their filter matches (tc 6.1 prints no JSON
    for htb classes: its text is read)."""
    tc = ["tc", "-n", place.namespace]
    classes = _run(*tc, "class", "show", "dev", "eth0", check=False).stdout
    rates = {
        match.group(1): float(match.group(2)) * UNITS[match.group(3)]
        for match in re.finditer(r"class htb (\S+) .*?\brate (\d+(?:\.\d+)?)([KMGT]?)bit", classes)
    }
    filters = _run(*tc, "filter", "show", "dev", "eth0", check=False).stdout
    result: dict[str, float] = {}
    flow = None
    for line in filters.splitlines():
        if "flowid" in line:
            flow = line.split("flowid", 1)[1].split()[0]
        elif "match" in line and flow in rates:
            # "match 0a61a80b/ffffffff at 16": the destination address in hex.
            value = line.split("match", 1)[1].split("/")[0].strip()
            result[str(ipaddress.IPv4Address(int(value, 16)))] = rates[flow]
    return result


UNITS = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
