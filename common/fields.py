"""Serializer fields that take what the schema documents and nothing else."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rest_framework import serializers


class StrictCharField(serializers.CharField):
    """A string, as the schema says `type: string`: a number or a boolean is refused with the field and the reason
    (DRF's CharField would store `0` as "0", so the API took what its schema forbids)."""

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictBooleanField(serializers.BooleanField):
    """In a JSON body, `true` or `false` as the schema says `type: boolean` (DRF's BooleanField would take 0, 1,
    "yes" and "on"); a form, which has no booleans, still writes them as words."""

    def to_internal_value(self, data: Any) -> bool:
        if not isinstance(data, bool) and _json_body(self.context.get("request")):
            self.fail("invalid", input=data)
        return bool(super().to_internal_value(data))


def _json_body(request: Any) -> bool:
    return request is not None and "json" in (getattr(request, "content_type", "") or "")


def _is_number(data: Any) -> bool:
    return isinstance(data, int | float) and not isinstance(data, bool)


class StrictFloatField(serializers.FloatField):
    """In a JSON body, a number as the schema says `type: number` (DRF's FloatField would take `false` as 0.0 and
    "1.5" as 1.5); a form still writes numbers as text."""

    def to_internal_value(self, data: Any) -> float:
        if not _is_number(data) and _json_body(self.context.get("request")):
            self.fail("invalid")
        return float(super().to_internal_value(data))


class StrictIntegerField(serializers.IntegerField):
    """In a JSON body, a whole number as the schema says `type: integer` (`5` or `5.0`, not "5" nor `true`); a form
    still writes numbers as text."""

    def to_internal_value(self, data: Any) -> int:
        if not _is_number(data) and _json_body(self.context.get("request")):
            self.fail("invalid")
        return int(super().to_internal_value(data))


def many_as_list(serializer: serializers.Serializer[Any], data: Any) -> None:
    """A to-many field of a JSON body is a list as the schema says `type: array` (DRF would take an object, `{}`,
    as its keys): a 400 naming the field for anything else. Call it from `to_internal_value` before DRF's."""
    if not isinstance(data, Mapping):
        return
    wrong = {
        name: ["a list, as the schema says"]
        for name, field in serializer.fields.items()
        if isinstance(field, serializers.ManyRelatedField) and name in data and not isinstance(data[name], list)
    }
    if wrong and _json_body(serializer.context.get("request")):
        raise serializers.ValidationError(wrong)
