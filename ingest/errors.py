"""What a parser says of an item that makes no record."""

from __future__ import annotations


class ItemError(ValueError):
    """An item that cannot become a record; the message names the field and the reason."""


class Skip(Exception):
    """An item of a kind that carries no transfer (e.g. a Rucio event other than transfer-done/-failed)."""
