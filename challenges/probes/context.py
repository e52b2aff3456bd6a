"""gfal2 contexts that leave the caller's signals alone. Plain Python, no Django.

`gfal2.creat_context()` blocks almost every signal in the calling thread while it loads its plugins (measured on
Debian 12, gfal2 2.21.3: the thread's blocked mask goes from 0 to fffffffe3ff9ea07, SIGTERM, SIGINT and SIGUSR1
included) and never unblocks them. A process whose main thread made a context then ignores SIGTERM, and every
subprocess it starts inherits the mask: a `manage.py consume` started after a run would not stop on SIGTERM,
nor a gunicorn worker that started a run. Every context of the portal is made here, and the mask is put back.
"""

from __future__ import annotations

import signal
from typing import Any

import gfal2


def gfal2_context_new() -> Any:
    """A new gfal2 context; the calling thread's signal mask is the same after as before."""
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, [])  # read it
    try:
        return gfal2.creat_context()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
