"""API token authentication: `Authorization: Token KEY`, with the key checked by sites.tokens.

The drf-spectacular extension lives here too, so it is registered whenever DRF loads this class from
REST_FRAMEWORK["DEFAULT_AUTHENTICATION_CLASSES"], before any schema is built.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.plumbing import build_bearer_security_scheme_object
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.exceptions import AuthenticationFailed
from rest_framework.request import Request

from .models import ApiToken
from .roles import token_scope_apply
from .tokens import TokenError, token_verify


class ApiTokenAuthentication(BaseAuthentication):
    """`Authorization: Token KEY`. A request without that header is left to the other authentication classes;
    a bad key is a 401 that says why: "Invalid token.", "Token expired." or "Token revoked."."""

    keyword = "Token"

    def authenticate(self, request: Request) -> tuple[Any, ApiToken] | None:
        words = get_authorization_header(request).split()
        if not words or words[0].lower() != self.keyword.lower().encode():
            return None
        if len(words) == 1:
            raise AuthenticationFailed("Invalid token header. No credentials provided.")
        if len(words) > 2:
            raise AuthenticationFailed("Invalid token header. Token string should not contain spaces.")
        try:
            key = words[1].decode("ascii")
        except UnicodeError:
            message = "Invalid token header. Token string should not contain invalid characters."
            raise AuthenticationFailed(message) from None
        try:
            token = token_verify(key=key)
        except TokenError as exc:
            raise AuthenticationFailed(str(exc)) from None
        if not token.user.is_active:
            raise AuthenticationFailed("User inactive or deleted.")
        if token.membership is not None:
            token_scope_apply(user=token.user, membership=token.membership)
        return token.user, token

    def authenticate_header(self, request: Request) -> str:
        # Makes DRF answer 401 (with WWW-Authenticate: Token) rather than 403 to unauthenticated API calls.
        return self.keyword


class ApiTokenScheme(OpenApiAuthenticationExtension):
    """The token scheme in the OpenAPI schema, so Swagger offers it and the schema builds without warnings."""

    target_class = ApiTokenAuthentication
    name = "tokenAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, Any]:
        definition: dict[str, Any] = build_bearer_security_scheme_object(
            header_name="Authorization", token_prefix=ApiTokenAuthentication.keyword
        )
        definition["description"] = "An API key issued by a coordinator: `Authorization: Token KEY`."
        return definition
