"""Challenge pages, mounted at /challenges/."""

from django.urls import path

from . import views

app_name = "challenges"
urlpatterns = [
    path("", views.challenge_list, name="list"),
    path("new/", views.challenge_create, name="create"),
    path("plotly.min.js", views.plotly_js, name="plotly_js"),
    path("site/<str:name>/calendar.ics", views.site_calendar, name="site_calendar"),
    path("<slug:slug>/", views.challenge_clock, name="clock"),
    path("<slug:slug>/edit/", views.challenge_edit, name="edit"),
    path("<slug:slug>/load/", views.challenge_load, name="load"),
    path("<slug:slug>/injection-plans/", views.challenge_injection_plans, name="injection_plans"),
    path("<slug:slug>/calendar.ics", views.challenge_calendar, name="calendar"),
    path("<slug:slug>/activities/new/", views.activity_create, name="activity_create"),
    path("<slug:slug>/activities/<int:pk>/edit/", views.activity_edit, name="activity_edit"),
    path("<slug:slug>/activities/<int:pk>/delete/", views.activity_delete, name="activity_delete"),
    path("<slug:slug>/activities/<int:pk>/targets/new/", views.target_create, name="target_create"),
    path("<slug:slug>/targets/<int:pk>/edit/", views.target_edit, name="target_edit"),
    path("<slug:slug>/targets/<int:pk>/delete/", views.target_delete, name="target_delete"),
]
