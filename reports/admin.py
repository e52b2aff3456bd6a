"""Site and experiment reports in the admin, for coordinators: each report with its rows inline."""

from django.contrib import admin

from .models import (
    ExperimentAction,
    ExperimentProblem,
    ExperimentReport,
    ObservedRate,
    Outage,
    Problem,
    ReportComment,
    SiteAction,
    SiteReport,
)


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


class ExperimentProblemInline(admin.TabularInline):
    model = ExperimentProblem
    extra = 0


class ExperimentActionInline(admin.TabularInline):
    model = ExperimentAction
    extra = 0


@admin.register(ExperimentReport)
class ExperimentReportAdmin(admin.ModelAdmin):
    list_display = ["challenge", "experiment", "status", "updated_at"]
    list_filter = ["status", "challenge"]
    inlines = [ExperimentProblemInline, ExperimentActionInline]
