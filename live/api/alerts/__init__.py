"""The alerts' and the now board's API: `/api/v1/alerts/` (list, acknowledge, silence) and
`/api/v1/challenges/SLUG/now/` and `.../links/` (urls.py, views.py, serializers.py)."""
