"""The network table compares the MTUs of a link's two ends, as the JUNO challenge read them from both sides."""

from __future__ import annotations

from typing import Any

from sweeps.tables import mtu_ends


def row(source: str, destination: str, local: int | None, *, lost: bool = False, warn: bool = False) -> dict[str, Any]:
    return {
        "source": source,
        "destination": destination,
        "local_mtu": local,
        "large_packets_lost": lost,
        "mtu_mismatch": warn,
    }


def test_both_directions_say_which_end_has_the_smaller_mtu() -> None:
    rows = mtu_ends([row("T0", "T1B", 9000, lost=True, warn=True), row("T1B", "T0", 1500)])
    assert [(r["far_mtu"], r["smaller_mtu_at"], r["mtu_mismatch"]) for r in rows] == [
        (1500, "T1B", True),
        (9000, "T1B", True),  # from the 1500 side the path looks fine; the other end says otherwise
    ]


def test_equal_ends_are_no_mismatch() -> None:
    rows = mtu_ends([row("T0", "T1A", 9000), row("T1A", "T0", 9000)])
    assert [(r["far_mtu"], r["smaller_mtu_at"], r["mtu_mismatch"]) for r in rows] == [(9000, None, False)] * 2


def test_one_direction_with_large_packets_lost_blames_the_far_end() -> None:
    [only] = mtu_ends([row("T0", "T1B", 9000, lost=True, warn=True)])
    assert (only["far_mtu"], only["smaller_mtu_at"], only["mtu_mismatch"]) == (None, "T1B", True)


def test_loopbacks_65536_counts_as_the_65535_a_packet_can_be() -> None:
    rows = mtu_ends([row("A", "B", 65536), row("B", "A", 65535)])
    assert {r["smaller_mtu_at"] for r in rows} == {None}
