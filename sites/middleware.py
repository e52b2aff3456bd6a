"""Pages and their exports read with an API token, as the API is: `Authorization: Token KEY` on a GET.

Scripts fetch a page's table with `?format=csv|json` and the same token they use for the API; without this they
were sent to the login page (302). Only reads (GET, HEAD) are let in this way: a form is still posted from a
session, with its CSRF token. A bad key is a 401 that says why, never a silent fall-back to anonymous."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

from .authentication import TokenFailureThrottle
from .roles import token_scope_apply
from .tokens import TokenError, token_verify

KEYWORD = "token"


class PageTokenMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        header = request.headers.get("Authorization", "")
        if (
            header
            and request.method in ("GET", "HEAD")
            and not request.path.startswith("/api/")  # DRF authenticates the API itself
            and not request.user.is_authenticated
        ):
            words = header.split()
            if len(words) == 2 and words[0].lower() == KEYWORD:
                throttle = TokenFailureThrottle()  # the API's count of bad keys per address, shared
                wait = throttle.exhausted(request)  # type: ignore[arg-type]
                if wait is not None:
                    response = HttpResponse("Too many bad tokens from this address.\n", status=429)
                    response["Retry-After"] = str(max(1, int(wait)))
                    return response
                try:
                    token = token_verify(key=words[1])
                except TokenError as exc:
                    throttle.failed()
                    return _unauthorized(str(exc))
                if not token.user.is_active:
                    return _unauthorized("User inactive or deleted.")
                if token.membership is not None:
                    token_scope_apply(user=token.user, membership=token.membership)
                request.user = token.user
        return self.get_response(request)


def _unauthorized(reason: str) -> HttpResponse:
    response = HttpResponse(f"{reason}\n", status=401, content_type="text/plain; charset=utf-8")
    response["WWW-Authenticate"] = "Token"
    return response
