"""Bounded pagination for every API list: limit/offset, 100 rows a page unless asked, at most `max_limit` (1000)."""

from rest_framework.pagination import LimitOffsetPagination


class BoundedLimitOffsetPagination(LimitOffsetPagination):
    default_limit = 100
    max_limit = 1000
