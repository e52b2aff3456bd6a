"""Sweep pages under /sweeps/."""

from django.urls import path

from . import views

app_name = "sweeps"
urlpatterns = [
    path("", views.sweep_list, name="list"),
    path("new/", views.sweep_new, name="new"),
    path("<int:pk>/", views.sweep_detail, name="detail"),
    path("<int:pk>/cancel/", views.sweep_cancel_view, name="cancel"),
    path("<int:pk>/compare/", views.sweep_compare, name="compare"),
]
