"""The API's answer to errors that reach it from the database or the parser: a 4xx with the reason, never a 500.

Checks that belong to a field are made by the serializers and services; what is left here are the classes of
error whose cause is the request but which only the database or the JSON parser notices."""

from __future__ import annotations

from typing import Any

from django.db import DataError, IntegrityError
from django.db.models import ProtectedError
from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler
from rest_framework.views import set_rollback


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    response = drf_exception_handler(exc, context)
    if response is not None:
        return response
    if isinstance(exc, ProtectedError | IntegrityError | DataError | RecursionError):
        set_rollback()  # the request's transaction, if any, is over
    if isinstance(exc, ProtectedError):
        held: dict[str, int] = {}
        for row in exc.protected_objects:
            name = str(row._meta.verbose_name_plural)
            held[name] = held.get(name, 0) + 1
        what = ", ".join(f"{count} {name}" for name, count in sorted(held.items()))
        detail = f"cannot delete it: {what} refer to it (delete or move them first; nothing was deleted)"
        return Response({"detail": detail, "held_by": held}, status=status.HTTP_409_CONFLICT)
    if isinstance(exc, IntegrityError):
        reason = str(exc).splitlines()[0] if str(exc) else "a unique or related row"
        return Response({"detail": f"conflicts with what is stored: {reason}"}, status=status.HTTP_409_CONFLICT)
    if isinstance(exc, DataError):
        reason = str(exc).splitlines()[0] if str(exc) else "out of range"
        return Response(
            {"detail": f"a value the database cannot store (a NUL byte, or out of range): {reason}"},
            status=status.HTTP_400_BAD_REQUEST,
        )
    if isinstance(exc, RecursionError):
        return Response({"detail": "JSON nested too deeply"}, status=status.HTTP_400_BAD_REQUEST)
    return None
