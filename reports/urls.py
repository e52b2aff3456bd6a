"""Site report pages, mounted at /reports/."""

from django.urls import path

from . import views

app_name = "reports"
urlpatterns = [
    path("<slug:slug>/", views.report_list, name="list"),
    path("<slug:slug>/new/", views.report_create, name="create"),
    path("<slug:slug>/outages/", views.challenge_outages, name="outages"),
    path("<slug:slug>/<int:pk>/", views.report_detail, name="detail"),
    path("<slug:slug>/<int:pk>/edit/", views.report_edit, name="edit"),
    path("<slug:slug>/<int:pk>/<str:step>/", views.report_step, name="step"),
]
