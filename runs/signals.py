"""Signals of runs for the apps above them (sweeps), sent explicitly by runs' own services, never by a model's save:
a queryset `.update()` or a save that names other fields cannot skip them.

`run_ended` (kwarg `run`, its row locked and just ended): sent by `runs.ends.run_end`, the one writer of a run's
end, inside the end's transaction. `run_copies_settled` (kwarg `run`): an ended run's copies were kept, deleted or
could not all be deleted (`runs.copies`), so that what waited for the disk may go on. Receivers run inside the
sender's transaction and enqueue their work with `transaction.on_commit`.
"""

from __future__ import annotations

from django.dispatch import Signal

run_ended = Signal()
run_copies_settled = Signal()
