"""Filters whose schema says what they take: an id is a whole number from 1 to PostgreSQL's bigint, and a count
a whole number (`?concurrency=0.5` is a 400 naming the parameter, not an empty list), so that a client generated
from the schema sends what the API takes."""

from __future__ import annotations

from typing import Any

import django_filters
from django import forms
from drf_spectacular.utils import extend_schema_field

ID_MAX = 2**63 - 1  # PostgreSQL's bigint: a larger id would be a database error, not "no such row"


@extend_schema_field({"type": "integer", "minimum": 0, "maximum": ID_MAX})
class WholeNumberFilter(django_filters.NumberFilter):
    """A whole number, 0 or more (`2` and `2.0`; not `2.5`)."""

    field_class = forms.IntegerField

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("min_value", 0)
        kwargs.setdefault("max_value", ID_MAX)
        super().__init__(*args, **kwargs)


@extend_schema_field({"type": "integer", "minimum": 1, "maximum": ID_MAX})
class IdFilter(WholeNumberFilter):
    """A row's id: a whole number from 1 to PostgreSQL's bigint."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("min_value", 1)
        super().__init__(*args, **kwargs)


@extend_schema_field({"type": "boolean"})
class StrictBooleanFilter(django_filters.TypedChoiceFilter):
    """`true` or `false` (as a client writes a boolean in a query); anything else is a 400 naming the parameter,
    not a filter silently left out."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("choices", [("true", "true"), ("false", "false")])
        kwargs.setdefault("coerce", lambda text: text == "true")
        super().__init__(*args, **kwargs)
