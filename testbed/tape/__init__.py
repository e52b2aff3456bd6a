"""The emulated tape of the testbed's tape site: a recall scheduler with tape drives, and the WLCG Tape REST API.

Plain Python (stdlib only, no Django), run as::

    python -m testbed.tape --root DIR --host 127.0.0.1 --https-port P --control-port C --cert CERT --key KEY \\
        --drives N --drive-rate BYTES_PER_S --mount-time S --stage-delay S --sitename NAME

Namespace: ``DIR/disk/<lfn>`` is the disk buffer (the online copies, XRootD's ``oss.localroot``) and ``DIR/tape/<lfn>``
holds the tape copies. The tape (cartridge) of a file is its parent directory.

The model: each file of a stage request becomes eligible ``stage-delay`` seconds after the request; ``drives`` drive
threads take eligible files first in, first out; a drive that has to switch to another tape pays ``mount-time``
seconds, a drive that holds the tape already does not; reading takes ``size / drive-rate`` seconds; the file is then
copied from tape to disk (atomically, owned by the owner of ``DIR/disk``). Files already on disk complete at once,
files that are not on tape fail with "file not on tape".

Servers:

- HTTPS on ``host:https-port``: the WLCG Tape REST API v1 as gfal2 2.21.3 uses it (``/.well-known/wlcg-tape-rest-api``,
  ``/api/v1/stage/``, ``/api/v1/stage/<id>``, ``/api/v1/stage/<id>/cancel``, ``DELETE /api/v1/stage/<id>``,
  ``/api/v1/release/<id>``, ``/api/v1/archiveinfo/``), GET/HEAD/PROPFIND of the files (reads only from disk),
  and ``GET /status``.
- Plain HTTP on ``127.0.0.1:control-port``: the same, plus the internal endpoints of the XRootD prepare program
  (testbed/tape_prep.py): ``POST /internal/stage`` ``{"requestId", "paths"}`` (the caller names the request),
  ``POST /internal/query`` ``{"requestId", "paths"}``, ``POST /internal/cancel`` ``{"requestId", "paths"}`` and
  ``POST /internal/evict`` ``{"paths"}``.
"""

from .http import TapeHTTPServer, TapeRequestHandler
from .library import TapeLibrary
from .model import (
    API_PREFIX,
    CANCELED,
    COMPLETED,
    FAILED,
    FINAL_STATES,
    NOT_ON_TAPE,
    STARTED,
    SUBMITTED,
    Drive,
    FileTask,
    StageRequest,
    TapeError,
    log,
    normalize_path,
)

__all__ = [
    "API_PREFIX",
    "CANCELED",
    "COMPLETED",
    "FAILED",
    "FINAL_STATES",
    "NOT_ON_TAPE",
    "STARTED",
    "SUBMITTED",
    "Drive",
    "FileTask",
    "StageRequest",
    "TapeError",
    "TapeHTTPServer",
    "TapeLibrary",
    "TapeRequestHandler",
    "log",
    "normalize_path",
]
