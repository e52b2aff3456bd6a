"""What a job tells the agent that takes it: plain JSON, everything the agent needs to run it with `measure/` and
nothing it could use for another site's work (URLs, sizes, the probe's parameters, the grants its tokens are
asked for). The agent's version of each kind is in `agent/work.py`."""

from __future__ import annotations

from typing import Any

from ..choices import JobKind
from ..copies import run_copies_to_delete
from ..credentials import copy_grants, delete_grants, run_grants, test_file_grants
from ..kinds.registry import run_parameters
from ..kinds.transfer import TRANSFER
from ..models import AgentJob
from ..reaper import copy_deadline_seconds


def job_payload(job: AgentJob) -> dict[str, Any]:
    """The job as the agent receives it from its claim."""
    run = job.run
    payload: dict[str, Any] = {"id": job.pk, "kind": job.kind, "attempt": job.attempt, "run": run.pk, "probe": run.kind}
    if job.kind == JobKind.TRANSFER and job.file is not None:
        payload |= _transfer(job)
    elif job.kind == JobKind.PREPARE:
        parameters = TRANSFER.parameters(run)
        source = parameters.source
        payload |= {
            "source": source or "",
            "file_size": int(parameters.file_size or 0),
            "checksum": parameters.checksum or "ADLER32",
            "test_file_grants": test_file_grants(source) if source else [],
            "grants": run_grants(run),
        }
    elif job.kind == JobKind.PROBE:
        payload |= {"parameters": run_parameters(run).to_dict(), "grants": run_grants(run)}
    elif job.kind == JobKind.COPIES_DELETE:
        wanted = run_copies_to_delete(run.pk)
        payload |= {
            "urls": wanted.urls,
            "directories": wanted.directories,
            "grants": delete_grants(wanted.urls, wanted.directories),
        }
    return payload


def _transfer(job: AgentJob) -> dict[str, Any]:
    file, parameters = job.file, TRANSFER.parameters(job.run)
    assert file is not None
    options = parameters.copy_options()
    return {
        "file": file.pk,
        "source_url": file.source_url,
        "destination_url": file.destination_url,
        "size": file.size,
        # A copy finished on a look at its destination leaves gfal2's call, which deletes the destination when it
        # expires: not for copies a run keeps (runs.tasks.transfer_file_task says the same).
        "arrival_size": 0 if parameters.keeps_copies else file.size,
        "copy_mode": options["mode"] or "",
        "streams": options["streams"],
        "timeout": options["timeout"],
        "checksum": options["checksum"],
        "stall_timeout": options["stall_timeout"],
        "first_byte_timeout": options["first_byte_timeout"],
        "hung_after": copy_deadline_seconds(parameters),
        "grants": copy_grants(file.source_url, file.destination_url),
    }
