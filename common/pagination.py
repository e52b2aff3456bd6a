"""Bounded pagination for every API list: limit/offset, 100 rows a page unless asked, at most `max_limit` (1000).

A `limit` or `offset` that is not a whole number in range is a 400 naming the parameter (DRF alone would answer
the first page for `?offset=abc`), and the schema documents the same bounds, so that what a client generated from
it sends is what the API takes."""

from __future__ import annotations

from typing import Any

from rest_framework.exceptions import ValidationError
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.request import Request

DIGITS = 18


def whole_number_parameter(request: Request, name: str, *, minimum: int) -> int | None:
    """The query parameter `name` as a whole number of at least `minimum` (None when absent); a 400 with the
    parameter and the reason for anything else (an empty value too: the schema says a number)."""
    text = request.query_params.get(name)
    if text is None:
        return None
    if not text.isascii() or not text.isdigit():
        raise ValidationError({name: [f"a whole number, {minimum} or more (got {text[:40]!r})"]})
    # Past 18 digits it is more rows than any table holds (and than PostgreSQL's bigint): the same as the most.
    digits = text.lstrip("0")
    value = int(digits or "0") if len(digits) <= DIGITS else 10**DIGITS
    if value < minimum:
        raise ValidationError({name: [f"a whole number, {minimum} or more (got {text[:40]!r})"]})
    return value


class BoundedLimitOffsetPagination(LimitOffsetPagination):
    default_limit = 100
    max_limit = 1000

    def get_limit(self, request: Request) -> int:
        limit = whole_number_parameter(request, self.limit_query_param, minimum=1)
        return self.default_limit if limit is None else min(limit, self.max_limit)

    def get_offset(self, request: Request) -> int:
        return whole_number_parameter(request, self.offset_query_param, minimum=0) or 0

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        return [
            {
                "name": self.limit_query_param,
                "required": False,
                "in": "query",
                "description": f"rows a page (default {self.default_limit}; more than {self.max_limit} gives "
                f"{self.max_limit})",
                "schema": {"type": "integer", "minimum": 1},
            },
            {
                "name": self.offset_query_param,
                "required": False,
                "in": "query",
                "description": "the rows to skip before the page's first",
                "schema": {"type": "integer", "minimum": 0},
            },
        ]
