"""The API's answer to errors that reach it from the database or the parser: a 4xx with the reason, never a 500.

Checks that belong to a field are made by the serializers and services; what is left here are the classes of
error whose cause is the request but which only the database or the JSON parser notices."""

from __future__ import annotations

from typing import Any

from django.db import DataError, IntegrityError, InterfaceError, OperationalError
from django.db.models import ProtectedError
from rest_framework import status
from rest_framework.exceptions import ValidationError
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler
from rest_framework.views import set_rollback

DATABASE_AWAY_RETRY_AFTER = 10  # seconds: a PostgreSQL restart or fail-over takes a few
DATABASE_AWAY = (
    "the database is not answering right now (restarting?): nothing of this request was stored; "
    f"send it again in {DATABASE_AWAY_RETRY_AFTER} s"
)


def database_away(exc: BaseException | None) -> bool:
    """Whether an error means the database went away (a restart, a fail-over, a lost connection), not the request."""
    return isinstance(exc, OperationalError | InterfaceError)


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    response = drf_exception_handler(exc, context)
    if response is not None:
        _json_for_errors(context.get("request"))
    if response is not None and isinstance(exc, ValidationError) and _only_duplicates(exc.get_codes()):
        response.status_code = status.HTTP_409_CONFLICT  # the request is valid; what is stored is in its way
    if response is None and isinstance(exc, DATABASE_ERRORS):
        set_rollback()  # the request's transaction, if any, is over
        response = _database_error_response(exc)
    return response


def _json_for_errors(request: Any) -> None:
    """An error is JSON as the schema documents it, also where the success is a file (`?format=csv`): a client
    reads the field and the reason the same way everywhere (the browsable API keeps its page)."""
    renderer = getattr(request, "accepted_renderer", None)
    if renderer is not None and renderer.format not in ("json", "api"):
        request.accepted_renderer, request.accepted_media_type = JSONRenderer(), JSONRenderer.media_type


def _only_duplicates(codes: Any) -> bool:
    """Whether every reason of a refusal is a duplicate of a stored row (DRF's `unique` validators, or a check that
    says so with code="unique"): a 409 as the schema documents, the fields and their messages as for a 400."""
    if isinstance(codes, dict):
        return bool(codes) and all(_only_duplicates(value) for value in codes.values())
    if isinstance(codes, list):
        return bool(codes) and all(_only_duplicates(value) for value in codes)
    return codes == "unique"


DATABASE_ERRORS = (ProtectedError, IntegrityError, DataError, RecursionError, OperationalError, InterfaceError)


def _database_error_response(exc: Exception) -> Response:
    if database_away(exc):
        # The request's transaction died with its connection: nothing of a batch was stored. 503, not 500.
        return Response(
            {"detail": DATABASE_AWAY},
            status=status.HTTP_503_SERVICE_UNAVAILABLE,
            headers={"Retry-After": str(DATABASE_AWAY_RETRY_AFTER)},
        )
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
    return Response({"detail": "JSON nested too deeply"}, status=status.HTTP_400_BAD_REQUEST)
