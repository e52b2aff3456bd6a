"""Keyset pagination of the transfer records: a page is the `limit` records after a cursor in (start, id) order,
read from the (start, id) index whatever its depth; no count (counting 100 million records takes seconds)."""

from __future__ import annotations

import base64
import binascii
from datetime import datetime
from typing import Any

from django.db.models import Q, QuerySet
from rest_framework.exceptions import ValidationError
from rest_framework.pagination import BasePagination
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.utils.urls import replace_query_param

from common.pagination import whole_number_parameter
from common.times import iso_utc


def cursor_encode(start: datetime, record_id: int) -> str:
    """The cursor of the records after this one: opaque to clients (base64url of its start and id)."""
    return base64.urlsafe_b64encode(f"{iso_utc(start)}|{record_id}".encode()).decode().rstrip("=")


def cursor_decode(cursor: str) -> tuple[datetime, int]:
    """The (start, id) of a cursor; a clear 400 for anything else."""
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        start_text, id_text = text.split("|")
        start = datetime.fromisoformat(start_text.replace("Z", "+00:00"))
        record_id = int(id_text)
    except (binascii.Error, UnicodeDecodeError, ValueError) as exc:
        raise ValidationError({"after": "not a cursor of this list: use the `next` link of a page"}) from exc
    if start.tzinfo is None:
        raise ValidationError({"after": "not a cursor of this list: use the `next` link of a page"})
    return start, record_id


class RecordKeysetPagination(BasePagination):
    """`?limit=N` (default 100, at most 1000) and `?after=CURSOR` (the `next` link's); the queryset must be
    ordered by (start, id)."""

    default_limit = 100
    max_limit = 1000

    def paginate_queryset(self, queryset: QuerySet[Any], request: Request, view: Any = None) -> list[Any]:
        self.request = request
        self.limit = self._limit(request)
        after = request.query_params.get("after")
        if after:
            start, record_id = cursor_decode(after)
            # start >= the cursor's is what the index range uses; the rest breaks ties by id.
            queryset = queryset.filter(start__gte=start).filter(Q(start__gt=start) | Q(id__gt=record_id))
        rows = list(queryset[: self.limit + 1])
        self.last = rows[self.limit - 1] if len(rows) > self.limit else None
        return rows[: self.limit]

    def _limit(self, request: Request) -> int:
        limit = whole_number_parameter(request, "limit", minimum=1)
        return self.default_limit if limit is None else min(limit, self.max_limit)

    def get_next_link(self) -> str | None:
        if self.last is None:
            return None
        url = self.request.build_absolute_uri()
        return replace_query_param(url, "after", cursor_encode(self.last.start, self.last.pk))

    def get_paginated_response(self, data: Any) -> Response:
        return Response({"next": self.get_next_link(), "results": data})

    def get_paginated_response_schema(self, schema: dict[str, Any]) -> dict[str, Any]:
        return {
            "type": "object",
            "required": ["next", "results"],
            "properties": {
                "next": {"type": "string", "nullable": True, "format": "uri", "description": "the next page"},
                "results": schema,
            },
        }

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        return [
            {
                "name": "limit",
                "required": False,
                "in": "query",
                "description": f"records a page (default {self.default_limit}, at most {self.max_limit})",
                "schema": {"type": "integer", "minimum": 1},
            },
            {
                "name": "after",
                "required": False,
                "in": "query",
                "description": "the cursor of the `next` link: the records after it in (start, id) order",
                "schema": {"type": "string"},
            },
        ]
