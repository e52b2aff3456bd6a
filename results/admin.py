"""Django admin for coordinators: the failure rules (the pages at /results/failures/rules/ do the same). Every
change re-categorises the stored failed records once committed, as on the pages and the API."""

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from .forms import FailureRuleForm
from .models import FailureRule
from .tasks import failures_recategorize_on_commit


@admin.register(FailureRule)
class FailureRuleAdmin(admin.ModelAdmin):
    form = FailureRuleForm
    list_display = ["position", "pattern", "category", "enabled", "note"]
    list_editable = ["enabled"]
    list_filter = ["category", "enabled"]
    search_fields = ["pattern", "note"]
    ordering = ["position", "id"]

    # save_model serves the change form and the list's editable column; delete_queryset the bulk delete action.
    def save_model(self, request: HttpRequest, obj: FailureRule, form: Any, change: bool) -> None:
        super().save_model(request, obj, form, change)
        failures_recategorize_on_commit()

    def delete_model(self, request: HttpRequest, obj: FailureRule) -> None:
        super().delete_model(request, obj)
        failures_recategorize_on_commit()

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[FailureRule]) -> None:
        super().delete_queryset(request, queryset)
        failures_recategorize_on_commit()
