"""The coordinators' token page: every API token, issuing one for a user and role (its key shown once), revoking."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods, require_POST

from .choices import Role
from .models import ApiToken, Experiment, Site
from .roles import membership_scope_problem, user_may
from .tokens import token_issue, token_revoke, tokens_for_listing

View = Callable[..., HttpResponse]


def coordinator_required(view: View) -> View:
    """Log in first; then coordinators only (403 for everyone else)."""

    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not user_may(user=request.user, action="manage"):
            raise PermissionDenied("Only coordinators manage API tokens.")
        return view(request, *args, **kwargs)

    return login_required(wrapped)


class TokenCreateForm(forms.Form):
    """Who gets the token and with which role; the user is created (without a password) when missing."""

    username = forms.CharField(max_length=150, help_text="created, without a password, when missing")
    role = forms.ChoiceField(choices=Role.choices)
    site = forms.ModelChoiceField(
        queryset=Site.objects.order_by("name"), to_field_name="name", required=False, help_text="for a site admin"
    )
    experiment = forms.ModelChoiceField(
        queryset=Experiment.objects.all(), to_field_name="name", required=False, help_text="for a DDM service"
    )
    name = forms.CharField(max_length=100, required=False, help_text="what the token is for")
    days = forms.IntegerField(min_value=1, max_value=3650, help_text="days until it expires")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["days"].initial = settings.API_TOKEN_DAYS

    def clean(self) -> dict[str, Any]:
        cleaned: dict[str, Any] = super().clean() or {}
        role = cleaned.get("role")
        if role:
            problem = membership_scope_problem(
                role=role, site=cleaned.get("site"), experiment=cleaned.get("experiment")
            )
            if problem:
                # Show it beside the field that is missing or superfluous.
                if role == Role.SITE_ADMIN:
                    field = "site" if cleaned.get("site") is None else "experiment"
                elif role == Role.DDM:
                    field = "experiment" if cleaned.get("experiment") is None else "site"
                else:
                    field = "site" if cleaned.get("site") is not None else "experiment"
                self.add_error(field, problem)
        return cleaned


@never_cache
@coordinator_required
@require_http_methods(["GET", "POST"])
def token_list(request: HttpRequest) -> HttpResponse:
    """All tokens and the form to issue one; a successful POST shows the new key on this response only."""
    form = TokenCreateForm(request.POST or None)
    issued: tuple[ApiToken, str] | None = None
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            issued = token_issue(
                username=data["username"],
                role=data["role"],
                site=data["site"],
                experiment=data["experiment"],
                name=data["name"],
                days=data["days"],
            )
        except ValidationError as exc:
            form.add_error("username", exc)
        else:
            form = TokenCreateForm()
    status = 400 if request.method == "POST" and issued is None else 200
    context = {
        "tokens": tokens_for_listing(),
        "form": form,
        "issued_token": issued[0] if issued else None,
        "issued_key": issued[1] if issued else None,
    }
    return render(request, "sites/tokens.html", context, status=status)


@coordinator_required
@require_POST
def token_revoke_view(request: HttpRequest, pk: int) -> HttpResponse:
    """Revoke one token (a POST with the CSRF token) and return to the list."""
    token = get_object_or_404(ApiToken.objects.select_related("user"), pk=pk)
    token_revoke(token=token)
    messages.success(request, f"Revoked {token.prefix}… of {token.user}.")
    return redirect("tokens:list")
