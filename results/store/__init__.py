"""How records are kept: their rows (rows.py), their identity (keys.py), monthly partitions, retention and
the rollups that every rate reads (rollups.py)."""
