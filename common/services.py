"""The API's side of a service call: a service raises Django's PermissionDenied and ValidationError (the pages show
them as they are); an API view answers them as DRF's 403 and 400, with the messages by field."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework import serializers
from rest_framework.exceptions import PermissionDenied

T = TypeVar("T")


def validation_error(exc: DjangoValidationError) -> serializers.ValidationError:
    """A service's ValidationError as DRF's, keeping the places of the problems."""
    if hasattr(exc, "error_dict"):
        return serializers.ValidationError(exc.message_dict)
    return serializers.ValidationError({"non_field_errors": exc.messages})


def service_call(call: Callable[[], T], *, refused: str | None = None) -> T:
    """Run a service; its refusal becomes DRF's 403 (its message, else `refused`), its problems DRF's 400."""
    try:
        return call()
    except DjangoPermissionDenied as exc:
        raise PermissionDenied(str(exc) or refused) from exc
    except DjangoValidationError as exc:
        raise validation_error(exc) from exc
