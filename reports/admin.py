"""Site reports in the admin, for coordinators: the report with its rows inline."""

from django.contrib import admin

from .models import ObservedRate, Outage, Problem, ReportComment, SiteAction, SiteReport


class ObservedRateInline(admin.TabularInline):
    model = ObservedRate
    extra = 0


class OutageInline(admin.TabularInline):
    model = Outage
    extra = 0


class ProblemInline(admin.TabularInline):
    model = Problem
    extra = 0


class SiteActionInline(admin.TabularInline):
    model = SiteAction
    extra = 0


class ReportCommentInline(admin.TabularInline):
    model = ReportComment
    extra = 0


@admin.register(SiteReport)
class SiteReportAdmin(admin.ModelAdmin):
    list_display = ["site", "challenge", "status", "submitted_at", "accepted_at"]
    list_filter = ["status", "challenge"]
    search_fields = ["site__name", "challenge__slug", "notes"]
    list_select_related = ["site", "challenge"]
    inlines = [ObservedRateInline, OutageInline, ProblemInline, SiteActionInline, ReportCommentInline]
