"""Results pages, mounted at /results/: the matrix, records and failure causes of a challenge, and the failure
rules."""

from django.urls import path

from . import views

app_name = "results-matrix"
urlpatterns = [
    # Before the <slug> routes: "failures" is not a challenge.
    path("failures/rules/", views.failure_rules, name="failure_rules"),
    path("failures/rules/recategorize/", views.failure_rules_recategorize, name="failure_rules_recategorize"),
    path("failures/rules/<int:pk>/edit/", views.failure_rule_edit, name="failure_rule_edit"),
    path(
        "failures/rules/<int:pk>/<str:action>/",
        views.failure_rule_action,
        name="failure_rule_action",
    ),
    path("<slug:slug>/matrix/", views.challenge_matrix, name="matrix"),
    path("<slug:slug>/records/", views.challenge_records, name="records"),
    path("<slug:slug>/failures/", views.challenge_failures, name="failures"),
]
