"""Django admin for coordinators: the failure rules (the pages at /results/failures/rules/ do the same)."""

from django.contrib import admin

from .forms import FailureRuleForm
from .models import FailureRule


@admin.register(FailureRule)
class FailureRuleAdmin(admin.ModelAdmin):
    form = FailureRuleForm
    list_display = ["position", "pattern", "category", "enabled", "note"]
    list_editable = ["enabled"]
    list_filter = ["category", "enabled"]
    search_fields = ["pattern", "note"]
    ordering = ["position", "id"]
