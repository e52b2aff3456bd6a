"""The FROM x TO matrix: a link's active time (active_time.py, defined once), the cells of any set of records
(cells.py), the stored unions kept as records are stored (intervals.py) and the matrix read from them (unions.py),
the challenge's matrix (challenge.py), the minute resolution (minutes.py), its pages (views.py, urls.py)."""
