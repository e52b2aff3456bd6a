"""Alerts, their subscriptions and deliveries in the admin, for coordinators."""

from typing import Any

from django import forms
from django.contrib import admin

from .models import Alert, AlertDelivery, AlertSubscription
from .webhooks import webhook_url_problem


@admin.register(Alert)
class AlertAdmin(admin.ModelAdmin):
    list_display = ["id", "challenge", "kind", "subject", "state", "started_at", "resolved_at", "silenced_until"]
    list_filter = ["state", "kind", "challenge"]
    search_fields = ["subject", "message"]
    list_select_related = ["challenge"]
    raw_id_fields = ["challenge", "target", "activity", "experiment", "site", "link_source", "link_destination"]
    raw_id_fields += ["acknowledged_by", "silenced_by"]


class AlertSubscriptionForm(forms.ModelForm):
    def clean_url(self) -> Any:
        url = self.cleaned_data.get("url")
        if url and (problem := webhook_url_problem(url)):
            raise forms.ValidationError(problem)
        return url


@admin.register(AlertSubscription)
class AlertSubscriptionAdmin(admin.ModelAdmin):
    form = AlertSubscriptionForm
    list_display = ["name", "url", "email", "format", "challenge", "active", "created_by", "created_at"]
    list_filter = ["active", "format", "challenge"]
    search_fields = ["name", "url", "email"]
    list_select_related = ["challenge", "created_by"]
    filter_horizontal = ["experiments", "sites"]
    raw_id_fields = ["created_by"]
    # The scope of the token it was made with is kept as it was made (sites.roles.actor_scoped).
    readonly_fields = ["scope_role", "scope_site", "scope_experiment"]


@admin.register(AlertDelivery)
class AlertDeliveryAdmin(admin.ModelAdmin):
    list_display = ["id", "alert", "subscription", "alert_state", "status", "attempts", "response_code", "sent_at"]
    list_filter = ["status", "alert_state"]
    search_fields = ["subscription__name", "error"]
    list_select_related = ["alert", "subscription"]
    raw_id_fields = ["alert", "subscription"]
    readonly_fields = ["created_at"]
