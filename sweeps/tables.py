"""What a sweep measured, as the JUNO challenge's tables: the matrix rows (one per transfer step: files, failures,
the aggregate rate over the step's active window and the sum of single-file rates, the top error), the network
rows (iperf3 and path MTU per link), the functional FROM x TO table per mode, the throughput tables per mode and
concurrency, the progress of the sweep, and the comparison with an earlier sweep.

Everything is read from the steps' runs and their transfer records (results.matrix.cells, one query per sweep), so
that a number on a page is exactly what the records say.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any

from django.db.models import Count
from django.db.models.functions import Left

from results.matrix.cells import LinkCell, link_matrix
from results.matrix.measured import measured_label
from results.models import TransferRecord
from runs.choices import RUN_ENDED, FileState
from runs.models import RunFile

from .choices import StepKind, StepState
from .models import Sweep, SweepStep

MAX_IP_PACKET = 65535  # bytes: loopback's 65536-byte MTU carries packets of 65535 at most

MATRIX_COLUMNS = [
    "step",
    "run",
    "state",
    "source",
    "destination",
    "mode",
    "concurrency",
    "files_ok",
    "files_failed",
    "failure_ratio",
    "aggregate_rate",
    "sum_of_file_rates",
    "volume",
    "active_seconds",
    "top_error",
    "measured_from",
    "measured_by",
]
NETWORK_COLUMNS = [
    "step",
    "run",
    "state",
    "source",
    "destination",
    "iperf3_bps",
    "iperf3_rate",
    "retransmits",
    "path_mtu",
    "local_mtu",
    "far_mtu",
    "reached",
    "mtu_mismatch",
    "smaller_mtu_at",
    "hops",
    "error",
    "measured_from",
    "measured_by",
]
SHORT_ERROR = 60


def short_error(text: str) -> str:
    """An error as the seed's slides showed it ("SSLException: broken pipe"): gfal2's [plugin][function] prefixes
    and its "ERROR:" dropped, the first line, at most SHORT_ERROR characters."""
    line = (text or "").strip().splitlines()[0] if (text or "").strip() else ""
    line = re.sub(r"^(\s*\[[^\]]*\]\s*)+", "", line)
    line = re.sub(r"^(ERROR|Error|error):\s*", "", line).strip()
    http = re.search(r"HTTP (\d{3})\s*:?\s*([A-Za-z][A-Za-z -]*[A-Za-z])", line)
    if http:  # gfal2's HTTP copies end in the status that says it: "... copy HTTP 405 : Method Not Allowed, ..."
        category = re.match(r"([a-z][a-z ]+):", line)  # the portal's own words first ("destination refused ...")
        line = (f"{category.group(1)}: " if category else "") + f"HTTP {http.group(1)} {http.group(2)}"
    return line if len(line) <= SHORT_ERROR else line[: SHORT_ERROR - 1].rstrip() + "…"


STEP_RELATED = ("source", "destination", "run", "run__agent__site")


def steps_of(sweep: Sweep) -> list[SweepStep]:
    """The sweep's steps in order: those prefetched with it (sweeps.selectors.sweeps_visible_to), else read."""
    prefetched: list[SweepStep] | None = getattr(sweep, "step_list", None)
    if prefetched is not None:
        return prefetched
    return list(sweep.steps.select_related(*STEP_RELATED).order_by("index"))


def step_measured_by(step: SweepStep) -> str | None:
    """Where the step was measured, in the words of every surface (results.matrix.measured): its run's agent when
    one ran it, else where its run was sent (`agent.SITE`, `site.SITE`, the portal's default queue); None before it
    was sent anywhere."""
    agent = step.run.agent if step.run is not None else None
    if agent is not None:
        return measured_label(agents=[agent.site.name])
    if not step.queue:
        return None
    if step.queue.startswith("agent."):
        return measured_label(agents=[step.measured_from])
    if step.queue.startswith("site."):
        return measured_label(site_workers=[step.measured_from])
    return measured_label(portal=True)


def _step_state(step: SweepStep) -> str:
    """pending, running, cancelled, not-started, or the run's own end (finished, partly, failed, cancelled)."""
    if step.run is not None and step.run.state in RUN_ENDED:
        return step.run.state
    return step.state


def matrix_rows(sweep: Sweep, steps: list[SweepStep] | None = None) -> list[dict[str, Any]]:
    """One row per transfer step, in step order (pending steps with no numbers yet). Files ok and failed are the
    step's files by their final outcome (a try lost with its worker and copied again is one file, ok); the rates
    are its transfer records' (results.matrix.cells, by run): bytes of the ok transfers over the union of all its
    transfers' intervals, and each ok file's bytes over its own duration, added up over C files in flight
    (_per_round)."""
    steps = steps if steps is not None else steps_of(sweep)
    transfer = [step for step in steps if step.kind == StepKind.TRANSFER]
    run_ids = [step.run_id for step in transfer if step.run_id]
    cells: dict[int, LinkCell] = {}
    files: dict[int, Counter[str]] = defaultdict(Counter)
    errors: dict[int, Counter[str]] = defaultdict(Counter)
    if run_ids:
        for cell in link_matrix(TransferRecord.objects.filter(run_id__in=run_ids), by_run=True):
            cells[next(iter(cell.runs))] = cell
        counts = RunFile.objects.filter(run_id__in=run_ids).order_by().values("run_id", "state").annotate(n=Count("pk"))
        for run_id, state, count in counts.values_list("run_id", "state", "n"):
            files[run_id][state] = count
        failed = RunFile.objects.filter(run_id__in=run_ids, state=FileState.FAILED).exclude(error="")
        for run_id, error in failed.values_list("run_id", Left("error", 300)):
            errors[run_id][error] += 1
    rows = []
    for step in transfer:
        found = cells.get(step.run_id) if step.run_id else None
        ok = files[step.run_id][FileState.DONE] if step.run_id else None
        bad = files[step.run_id][FileState.FAILED] if step.run_id else None
        error = errors[step.run_id].most_common(1)[0][0] if step.run_id and errors[step.run_id] else ""
        if not error and step.run is not None and step.run.state == "failed":
            error = step.run.message
        if step.state == StepState.NOT_STARTED:
            error = step.message
        rows.append(
            {
                "step": step.index,
                "run": step.run_id,
                "state": _step_state(step),
                "source": step.source.name,
                "destination": step.destination.name,
                "mode": step.mode,
                "concurrency": step.concurrency,
                "files_ok": ok,
                "files_failed": bad,
                "failure_ratio": bad / (ok + bad) if ok is not None and bad is not None and ok + bad else None,
                "aggregate_rate": found.rate if found else None,
                "sum_of_file_rates": _per_round(found, step.concurrency) if found and found.files_ok else None,
                "volume": found.volume if found else None,
                "active_seconds": found.active_seconds if found else None,
                "top_error": error,
                "measured_from": step.measured_from if step.queue else None,
                "measured_by": step_measured_by(step),
            }
        )
    return rows


def _per_round(cell: LinkCell, concurrency: int | None) -> float | None:
    """The single-file rates of a step's C files in flight, added up (the JUNO way): their plain sum when the step
    copied at most C files at once, else the sum scaled to C files (the mean file rate times C), so that 100
    files copied 10 at a time do not read as ten times the link."""
    if cell.sum_of_file_rates is None:
        return None
    rounds = cell.files_ok / concurrency if concurrency else 1.0
    return cell.sum_of_file_rates / max(rounds, 1.0)


def network_rows(sweep: Sweep, steps: list[SweepStep] | None = None) -> list[dict[str, Any]]:
    """One row per network step: iperf3 in bits per second (iperf3_bps) and bytes per second (iperf3_rate), the
    sender's retransmits, tracepath's path MTU, whether it reached the destination, the MTU of the source's
    interface towards the host, and the MTUs of both ends compared (mtu_ends)."""
    steps = steps if steps is not None else steps_of(sweep)
    rows = []
    for step in steps:
        if step.kind != StepKind.NETWORK:
            continue
        summary = step.run.summary if step.run is not None and isinstance(step.run.summary, dict) else {}
        totals = ((summary.get("pscheduler") or {}).get("summary") or {}).get("summary") or {}
        rate = summary.get("rate")
        warnings = [str(text) for text in summary.get("warnings") or []]
        error = ""
        if step.state == StepState.NOT_STARTED:
            error = step.message
        elif summary and not summary.get("ok"):
            error = str((summary.get("pscheduler") or {}).get("error") or "iperf3 failed")
        elif step.run is not None and step.run.state == "failed" and not summary:
            error = step.run.message
        rows.append(
            {
                "step": step.index,
                "run": step.run_id,
                "state": _step_state(step),
                "source": step.source.name,
                "destination": step.destination.name,
                "iperf3_bps": rate * 8 if rate is not None else None,
                "iperf3_rate": rate,
                "retransmits": totals.get("retransmits"),
                "path_mtu": summary.get("path_mtu"),
                "local_mtu": summary.get("local_mtu"),
                "reached": summary.get("reached"),
                "large_packets_lost": summary.get("small_packets_reached") is True and summary.get("reached") is False,
                "mtu_mismatch": any(text.startswith("MTU mismatch") for text in warnings) if summary else None,
                "hops": summary.get("hops"),
                "error": error,
                "measured_from": step.measured_from if step.queue else None,
                "measured_by": step_measured_by(step),
            }
        )
    return mtu_ends(rows)


def _mtu(value: Any) -> int | None:
    """An interface MTU as a path can carry it (loopback's 65536 is a 65535 packet at most)."""
    return min(int(value), MAX_IP_PACKET) if isinstance(value, int) else None


def mtu_ends(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each network row with the MTUs of both its ends compared, as the JUNO challenge read them from its two sides:
    far_mtu, the destination's own interface MTU (what the step from the destination back to the source found as
    its local MTU; None when the sweep did not measure that way); mtu_mismatch also when the two ends differ; and
    smaller_mtu_at, the end with the smaller MTU: the one with the smaller interface MTU when both are known, else
    the destination when the source's large packets were lost on the way where 1500-byte ones got through (the far
    end or a hop before it), else None (no mismatch seen)."""
    local = {(row["source"], row["destination"]): _mtu(row["local_mtu"]) for row in rows}
    for row in rows:
        here, far = _mtu(row["local_mtu"]), local.get((row["destination"], row["source"]))
        lost = row.pop("large_packets_lost")
        row["far_mtu"] = far
        smaller = None
        if here is not None and far is not None and here != far:
            smaller = row["source"] if here < far else row["destination"]
        elif lost and (far is None or here is None):
            smaller = row["destination"]
        row["smaller_mtu_at"] = smaller
        if smaller is not None:
            row["mtu_mismatch"] = True
    return rows


@dataclass
class Progress:
    total: int
    ended: int
    current: SweepStep | None
    eta_seconds: float | None

    def as_dict(self) -> dict[str, Any]:
        current = self.current
        return {
            "steps_total": self.total,
            "steps_ended": self.ended,
            "current_step": current.index if current else None,
            "current": str(current) if current else None,
            "eta_seconds": self.eta_seconds,
        }


def sweep_progress(sweep: Sweep, steps: list[SweepStep] | None = None) -> Progress:
    """Steps ended of all, the step under way, and an ETA: the mean time of the ended steps of each kind times
    the steps of that kind still to run (unknown until a step of that kind has ended)."""
    steps = steps if steps is not None else steps_of(sweep)
    over = [step for step in steps if step.state not in (StepState.PENDING, StepState.RUNNING)]
    current = next((step for step in steps if step.state == StepState.RUNNING), None)
    eta: float | None = 0.0
    for kind in StepKind.values:
        timed = [
            (step.finished_at - step.started_at).total_seconds()
            for step in over
            if step.kind == kind and step.started_at and step.finished_at and step.state == StepState.ENDED
        ]
        left = [step for step in steps if step.kind == kind and step.state in (StepState.PENDING, StepState.RUNNING)]
        if not left:
            continue
        if not timed:
            eta = None
            break
        eta = (eta or 0.0) + sum(timed) / len(timed) * len(left)
    return Progress(len(steps), len(over), current, eta if sweep.state in ("queued", "running") else None)
