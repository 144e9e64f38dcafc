"""Grade many submissions in parallel worker processes, one status per student.

Each job grades one notebook through the isolated harness and writes its record under
``harness/``; a record whose submission bytes are unchanged is reused, so re-running a
batch is idempotent. A hanging or crashing submission costs only its own points: the
harness kills its sandbox, and a broken notebook becomes a status, not an exception.
"""
from __future__ import annotations

import concurrent.futures
import hashlib
import json
import multiprocessing
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from ..errors import GraderError
from ..sandbox.confinement import Limits

RECORD_VERSION = 1


@dataclass(frozen=True)
class Job:
    student: str
    assignment: str
    notebook: str           # notebook name without .ipynb
    path: str               # the submitted file
    exercise_ids: tuple[str, ...]
    seed: int
    record_path: str
    limits: Limits = Limits()            # incl. the folders the sandbox must not see


@dataclass
class JobStatus:
    student: str
    assignment: str
    notebook: str
    status: str             # "graded", "invalid" (the notebook could not be read) or "error"
    points: int
    max_points: int
    seconds: float
    reason: str = ""
    reused: bool = False


def _write(path: Path, record: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")


def submission_digest(path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def current_record(record_path, submission_path, seed: int) -> dict | None:
    """The saved record of a submission if it was made from these exact bytes and seed."""
    record_path = Path(record_path)
    if not record_path.is_file():
        return None
    record = json.loads(record_path.read_text(encoding="utf-8"))
    fresh = (record.get("sha256") == submission_digest(submission_path)
             and record.get("version") == RECORD_VERSION and record.get("seed") == seed)
    return record if fresh else None


def grade_record(path, exercises: list, seed: int, limits: Limits) -> dict:
    """One submission's record: ``status`` "graded" with its results, or "invalid" (the
    notebook cannot be read) or "error" (a grader bug) with a reason and 0 points."""
    from ..grading.harness import grade_file

    max_points = sum(e.points for e in exercises)
    try:
        return {"status": "graded", **grade_file(path, seed=seed, exercises=exercises, limits=limits).to_json()}
    except GraderError as error:
        return {"status": "invalid", "reason": str(error), "points": 0, "max_points": max_points, "exercises": []}
    except Exception as error:  # a grader bug must not stop the batch
        return {"status": "error", "reason": f"{type(error).__name__}: {error}", "points": 0,
                "max_points": max_points, "exercises": []}


def grade_job(job: Job) -> JobStatus:
    """Grade one submission (runs in a worker process)."""
    from .. import chapters

    exercises = [chapters.get(i) for i in job.exercise_ids]
    max_points = sum(e.points for e in exercises)
    start = time.monotonic()
    record = current_record(job.record_path, job.path, job.seed)
    if record is not None:
        return JobStatus(job.student, job.assignment, job.notebook, record["status"], record.get("points", 0),
                         max_points, 0.0, record.get("reason", ""), reused=True)
    base = {"version": RECORD_VERSION, "sha256": submission_digest(job.path), "seed": job.seed, "student": job.student,
            "assignment": job.assignment, "notebook": job.notebook}
    record = {**base, **grade_record(job.path, exercises, job.seed, job.limits)}
    _write(Path(job.record_path), record)
    return JobStatus(job.student, job.assignment, job.notebook, record["status"], record["points"],
                     max_points, time.monotonic() - start, record.get("reason", ""))


def _progress(done: int, total: int, status: JobStatus) -> None:
    width = 24
    filled = width * done // total
    line = (f"[{'#' * filled}{'.' * (width - filled)}] {done}/{total} "
            f"{status.assignment}/{status.student}: {status.status} {status.points:g}/{status.max_points}"
            f"{' (reused)' if status.reused else f' ({status.seconds:.1f} s)'}")
    if sys.stderr.isatty():
        print("\r" + line.ljust(100), end="" if done < total else "\n", file=sys.stderr, flush=True)
    else:
        print(line, file=sys.stderr, flush=True)


def run_jobs(jobs: list[Job], workers: int) -> list[JobStatus]:
    """Grade ``jobs`` on ``workers`` processes; statuses come back in job order."""
    if not jobs:
        return []
    context = multiprocessing.get_context("spawn")  # no torch state inherited through fork
    statuses: dict[int, JobStatus] = {}
    with concurrent.futures.ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        futures = {pool.submit(grade_job, job): index for index, job in enumerate(jobs)}
        for future in concurrent.futures.as_completed(futures):
            job = jobs[futures[future]]
            try:
                status = future.result()
            except Exception as error:  # the worker itself died
                status = JobStatus(job.student, job.assignment, job.notebook, "error", 0, 0, 0.0,
                                   f"worker failed: {type(error).__name__}: {error}")
            statuses[futures[future]] = status
            _progress(len(statuses), len(jobs), status)
    return [statuses[i] for i in range(len(jobs))]


def summary_table(statuses: list[JobStatus]) -> str:
    rows = [f"{'assignment':10}  {'student':16}  {'status':8}  {'points':>9}  {'seconds':>7}  reason"]
    for s in statuses:
        rows.append(f"{s.assignment:10}  {s.student:16}  {s.status:8}  {s.points:>5.4g}/{s.max_points:<3}  "
                    f"{'reused' if s.reused else f'{s.seconds:7.1f}':>7}  {s.reason[:60]}")
    graded = [s for s in statuses if not s.reused]
    if graded:
        latencies = sorted(s.seconds for s in graded)
        rows.append(f"{len(statuses)} submissions; graded now: {len(graded)}, "
                    f"median {latencies[len(latencies) // 2]:.1f} s, max {latencies[-1]:.1f} s per submission")
    return "\n".join(rows)


def statuses_json(statuses: list[JobStatus]) -> list[dict]:
    return [asdict(s) for s in statuses]
