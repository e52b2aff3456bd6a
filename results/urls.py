"""Results pages, mounted at /results/: target versus achieved, one target over time, the comparison with an
earlier challenge. (The matrix, records and failure causes have their own routes in results/matrix/urls.py.)"""

from django.urls import path

from . import views

app_name = "results"
urlpatterns = [
    path("", views.challenge_list, name="list"),
    # Two segments: no challenge slug can take this path.
    path("about/numbers/", views.about_numbers, name="about"),
    path("<slug:slug>/", views.challenge_rates, name="rates"),
    path("<slug:slug>/targets/<int:pk>/", views.target_rates_page, name="target"),
    path("<slug:slug>/compare/", views.challenge_compare, name="compare"),
]
