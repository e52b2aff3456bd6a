"""Why transfers failed: the categories and causes (causes.py), read from the counts kept as records are stored
(counts.py)."""
