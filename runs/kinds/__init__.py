"""The kinds of runs, one module each (transfer: the per-file engine of transfers and tape writes; network,
io, cache, staging: the one-task probes), listed in registry.py. A kind says which ActivityKinds it serves, its
parameters (a typed frozen dataclass: checked by field, read from Run.parameters), how the plan completes them,
what it runs (measure/), the grants it asks storage for, its table, its results and its figures."""
