"""Site and experiment report pages, mounted at /reports/."""

from django.urls import path

from . import experiment_views, views

app_name = "reports"
urlpatterns = [
    path("<slug:slug>/", views.report_list, name="list"),
    path("<slug:slug>/new/", views.report_create, name="create"),
    path("<slug:slug>/outages/", views.challenge_outages, name="outages"),
    path("<slug:slug>/experiments/", experiment_views.experiment_report_list, name="experiment_list"),
    path("<slug:slug>/experiments/new/", experiment_views.experiment_report_create, name="experiment_create"),
    path(
        "<slug:slug>/experiment-reports/<int:pk>/",
        experiment_views.experiment_report_detail,
        name="experiment_detail",
    ),
    path(
        "<slug:slug>/experiment-reports/<int:pk>/edit/",
        experiment_views.experiment_report_edit,
        name="experiment_edit",
    ),
    path(
        "<slug:slug>/experiment-reports/<int:pk>/<str:step>/",
        experiment_views.experiment_report_step,
        name="experiment_step",
    ),
    path("<slug:slug>/<int:pk>/", views.report_detail, name="detail"),
    path("<slug:slug>/<int:pk>/edit/", views.report_edit, name="edit"),
    path("<slug:slug>/<int:pk>/<str:step>/", views.report_step, name="step"),
]
