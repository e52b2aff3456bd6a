"""The probes of the one-task runs (staging, network, cache, io) on the portal's side: begun, kept alive and
stored (runs.py), what each measured as its run page reads it (results.py), a challenge's probes as tables
(tables.py) and their pages (views.py). The code that measures is `measure/`, which imports no Django."""
