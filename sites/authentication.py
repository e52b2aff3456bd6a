"""API token authentication: `Authorization: Token KEY`, with the key checked by sites.tokens.

The drf-spectacular extension lives here too, so it is registered whenever DRF loads this class from
REST_FRAMEWORK["DEFAULT_AUTHENTICATION_CLASSES"], before any schema is built.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AnonymousUser
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.plumbing import build_bearer_security_scheme_object
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.exceptions import AuthenticationFailed, Throttled
from rest_framework.request import Request
from rest_framework.throttling import SimpleRateThrottle

from .agents import AgentKeyError, agent_verify
from .models import ApiToken, SiteAgent
from .roles import token_scope_apply
from .tokens import TokenError, token_verify


class TokenFailureThrottle(SimpleRateThrottle):
    """Bad keys from one address: past API_TOKEN_FAILURES (default 30 a minute) every token call from it is a 429
    until the minute has passed, whatever the key, so that keys cannot be guessed at speed. (DRF's throttles run
    after authentication and permissions, which answer a bad key first: they cannot count these.)"""

    scope = "token_failures"

    def get_cache_key(self, request: Request, view: Any) -> str:
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}

    def exhausted(self, request: Request) -> float | None:
        """Seconds to wait when this address is past its failures, else None."""
        self.key = self.get_cache_key(request, None)
        self.history = self.cache.get(self.key, [])
        self.now = self.timer()
        while self.history and self.history[-1] <= self.now - self.duration:
            self.history.pop()
        return self.wait() if len(self.history) >= self.num_requests else None

    def failed(self) -> None:
        self.history.insert(0, self.now)
        self.cache.set(self.key, self.history, self.duration)


class ApiTokenAuthentication(BaseAuthentication):
    """`Authorization: Token KEY`. A request without that header is left to the other authentication classes;
    a bad key is a 401 that says why: "Invalid token.", "Token expired." or "Token revoked."."""

    keyword = "Token"

    def authenticate(self, request: Request) -> tuple[Any, ApiToken] | None:
        words = get_authorization_header(request).split()
        if not words or words[0].lower() != self.keyword.lower().encode():
            return None
        throttle = TokenFailureThrottle()
        wait = throttle.exhausted(request)
        if wait is not None:
            raise Throttled(wait=wait, detail="Too many bad tokens from this address.")
        try:
            return self._authenticate(words)
        except AuthenticationFailed:
            throttle.failed()
            raise

    def _authenticate(self, words: list[bytes]) -> tuple[Any, ApiToken]:
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


class AgentAuthentication(BaseAuthentication):
    """`Authorization: Agent KEY`: a site's agent (sites.agents). The request's user stays anonymous, the agent is
    `request.auth`: an agent is no user, holds no role and reads nothing but its own site's work (sites.roles
    `agent_object_for`). Bad keys count against the address as bad tokens do."""

    keyword = "Agent"

    def authenticate(self, request: Request) -> tuple[Any, SiteAgent] | None:
        words = get_authorization_header(request).split()
        if not words or words[0].lower() != self.keyword.lower().encode():
            return None
        throttle = TokenFailureThrottle()
        wait = throttle.exhausted(request)
        if wait is not None:
            raise Throttled(wait=wait, detail="Too many bad keys from this address.")
        try:
            if len(words) != 2:
                raise AuthenticationFailed("Invalid agent header: `Agent KEY`.")
            try:
                return AnonymousUser(), agent_verify(key=words[1].decode("ascii"))
            except UnicodeError:
                raise AuthenticationFailed("Invalid agent header: the key has characters no key has.") from None
            except AgentKeyError as exc:
                raise AuthenticationFailed(str(exc)) from None
        except AuthenticationFailed:
            throttle.failed()
            raise

    def authenticate_header(self, request: Request) -> str:
        return self.keyword


class AgentScheme(OpenApiAuthenticationExtension):
    """The agents' scheme in the OpenAPI schema."""

    target_class = AgentAuthentication
    name = "agentAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, Any]:
        definition: dict[str, Any] = build_bearer_security_scheme_object(
            header_name="Authorization", token_prefix=AgentAuthentication.keyword
        )
        definition["description"] = "A site agent's key, from `manage.py agent_enroll`: `Authorization: Agent KEY`."
        return definition
