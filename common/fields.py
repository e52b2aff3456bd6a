"""Serializer fields that take what the schema documents and nothing else."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers


class StrictCharField(serializers.CharField):
    """A string, as the schema says `type: string`: a number or a boolean is refused with the field and the reason
    (DRF's CharField would store `0` as "0", so the API took what its schema forbids)."""

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)
