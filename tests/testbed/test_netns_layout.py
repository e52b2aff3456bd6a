"""The namespaced testbed's layout as data: addresses of its own subnet, the default MTUs and capacities, and the
changes TESTBED_NETNS_LAYOUT may make (a bad one refused with what is wrong)."""

from __future__ import annotations

import ipaddress

import pytest

from testbed.grid.netns import NetworkLayout, default_layout, default_subnet


def test_the_default_layout_is_the_juno_mismatch_and_one_capped_link() -> None:
    layout = default_layout(21000)
    assert layout.subnet == default_subnet(21000) == "10.82.8.0/24"
    assert layout.portal_address == "10.82.8.1" and layout.site("t0").address == "10.82.8.10"
    assert {place.name: place.mtu for place in layout.sites if place.mtu != 9000} == {"TB-T1-B": 1500}
    assert layout.capacities_of("TB-T1-A") == [("TB-T0", 1e9)] and layout.capacities_of("TB-T1-B") == []
    assert all(len(name) <= 15 for place in layout.sites for name in (place.host_veth, layout.bridge))
    assert NetworkLayout.from_dict(layout.to_dict()) == layout


def test_two_base_ports_never_share_a_subnet() -> None:
    assert not ipaddress.ip_network(default_subnet(21000)).overlaps(ipaddress.ip_network(default_subnet(21100)))


def test_a_layout_changes_mtus_and_replaces_the_links() -> None:
    layout = default_layout(21000, shape='{"mtu": {"TB-T1-A": 1500}, "links": [["TB-T0", "TB-T1-B", 2e8]]}')
    assert (layout.site("TB-T1-A").mtu, layout.site("TB-T1-B").mtu, layout.site("TB-T0").mtu) == (1500, 1500, 9000)
    assert layout.capacities_of("TB-T0") == [("TB-T1-B", 2e8)] and layout.capacities_of("TB-T1-A") == []


@pytest.mark.parametrize(
    ("shape", "says"),
    [
        ('{"mtu": {"TB-NOWHERE": 1500}}', "TB-NOWHERE"),
        ('{"mtu": {"TB-T0": 65536}}', "576 to 9000"),
        ('{"links": [["TB-T0", "TB-T0", 1e9]]}', "two different testbed sites"),
        ('{"links": [["TB-T0", "TB-T1-A"]]}', "not enough values"),
        ('{"links": [["TB-T0", "TB-T1-A", "fast"]]}', "bits per second"),
        ("[1, 2]", "not a layout"),
        ("{not json", "not a layout"),
    ],
)
def test_a_bad_layout_is_refused_saying_what_is_wrong(shape: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        default_layout(21000, shape=shape)


def test_a_public_or_too_small_subnet_is_refused() -> None:
    with pytest.raises(ValueError, match="private IPv4"):
        default_layout(21000, "8.8.8.0/24")
    with pytest.raises(ValueError, match="at least 32"):
        default_layout(21000, "10.9.9.0/28")
