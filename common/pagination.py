"""Bounded pagination for every API list: limit/offset, at most MAX_LIMIT rows a page."""

from rest_framework.pagination import LimitOffsetPagination


class BoundedLimitOffsetPagination(LimitOffsetPagination):
    default_limit = 100
    max_limit = 1000
