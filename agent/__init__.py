"""The site agent: what a site runs to take part in the portal's measurements without holding any key to the
portal's database or broker. `python -m agent --config FILE` (docs/operator/workers.md).

It connects out to the portal's API only (long polls, as CI runners take their jobs), with its own site's key; runs
the jobs it is given with `measure/` and the site's own grid credentials; keeps each result on disk until the
portal has it (agent/spool.py); and says what it is and what it runs at each heartbeat. It imports no Django and
no database driver (an import contract in pyproject.toml says so).
"""

VERSION = "1.0"
KINDS = ("transfer", "tape-write", "staging", "network", "cache", "io")
