"""API tokens: issue (the key is shown once), check, revoke. The database holds only SHA-256 hashes of keys."""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import models, transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from .models import ApiToken, Experiment, Membership, Site
from .roles import membership_grant, membership_scope_problem

PREFIX_LENGTH = 8
# last_used is written at most this often per token, so a busy client costs no write per request.
LAST_USED_RESOLUTION = timedelta(minutes=1)


class TokenError(Exception):
    """A key that does not authenticate; the message says why (shown to the API client)."""


class TokenInvalid(TokenError):
    def __init__(self) -> None:
        super().__init__("Invalid token.")


class TokenExpired(TokenError):
    def __init__(self) -> None:
        super().__init__("Token expired.")


class TokenRevoked(TokenError):
    def __init__(self) -> None:
        super().__init__("Token revoked.")


def token_hash(*, key: str) -> str:
    """The SHA-256 hex digest stored for a key. A key carries 256 random bits, so no salt or slow hash is needed."""
    return hashlib.sha256(key.encode()).hexdigest()


def token_create(
    *, user: Any, name: str = "", days: int | None = None, membership: Membership | None = None
) -> tuple[ApiToken, str]:
    """Issue a token for the user, valid for `days` (default API_TOKEN_DAYS). Returns the token and its key:
    the key exists only in this return value. With a membership, the token carries that one role only."""
    lifetime = settings.API_TOKEN_DAYS if days is None else days
    if lifetime < 1:
        raise ValidationError("a token lives at least one day", code="days")
    key = secrets.token_urlsafe(32)
    token = ApiToken.objects.create(
        user=user,
        membership=membership,
        name=name,
        prefix=key[:PREFIX_LENGTH],
        key_hash=token_hash(key=key),
        expires=timezone.now() + timedelta(days=lifetime),
    )
    return token, key


def token_verify(*, key: str) -> ApiToken:
    """The live token of a key, its last use recorded. Raises TokenInvalid, TokenRevoked or TokenExpired."""
    try:
        token = ApiToken.objects.select_related("user", "membership").get(key_hash=token_hash(key=key))
    except ApiToken.DoesNotExist:
        raise TokenInvalid() from None
    now = timezone.now()
    if token.revoked is not None:
        raise TokenRevoked()
    if token.expires <= now:
        raise TokenExpired()
    if token.last_used is None or now - token.last_used >= LAST_USED_RESOLUTION:
        # Conditional, so concurrent requests of one client still write once.
        ApiToken.objects.filter(pk=token.pk).filter(
            Q(last_used__isnull=True) | Q(last_used__lte=now - LAST_USED_RESOLUTION)
        ).update(last_used=now)
        token.last_used = now
    return token


def token_authenticate(*, key: str) -> ApiToken | None:
    """The live token of a key, or None when the key is unknown, revoked or expired."""
    try:
        return token_verify(key=key)
    except TokenError:
        return None


def token_revoke(*, token: ApiToken) -> None:
    """Revoke a token from now on; revoking it again keeps the first time."""
    if token.revoked is None:
        token.revoked = timezone.now()
        token.save(update_fields=["revoked"])


@transaction.atomic
def token_issue(
    *,
    username: str,
    role: str,
    site: Site | None = None,
    experiment: Experiment | None = None,
    name: str = "",
    days: int | None = None,
) -> tuple[ApiToken, str]:
    """Everything a new client needs in one step: the user (created without a usable password when missing),
    the role with its scope, and a token. Raises ValidationError and stores nothing when the scope does not fit
    the role or the username is not valid."""
    problem = membership_scope_problem(role=role, site=site, experiment=experiment)
    if problem:
        raise ValidationError(problem, code="scope")
    user_model = get_user_model()
    user = user_model._default_manager.filter(**{user_model.USERNAME_FIELD: username}).first()
    if user is None:
        if not username.strip():
            raise ValidationError("a username is needed", code="username")
        username_field = user_model._meta.get_field(user_model.USERNAME_FIELD)
        if isinstance(username_field, models.Field):
            username_field.run_validators(username)
        # No password: create_user stores an unusable one, so the account logs in only with its tokens.
        user = user_model._default_manager.create_user(username)
    membership = membership_grant(user=user, role=role, site=site, experiment=experiment)
    return token_create(user=user, name=name, days=days, membership=membership)


def tokens_for_listing() -> QuerySet[ApiToken]:
    """Every token with its user, newest first (the coordinators' token page)."""
    return ApiToken.objects.select_related("user").order_by("-created")
