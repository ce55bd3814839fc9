"""When a run began and how long it has trained, from its event log (``events.jsonl``, which
every run directory has held since the first skillgrad): the first event's time, the last
one's, and the time between each start or resume and the last event before the next one, so
that the days a stopped run waited to be resumed are not counted as training."""

from __future__ import annotations

from dataclasses import dataclass

from skillgrad.rundir import RunDir

STARTS = ("run_start", "resume")  # the events a process writes when it begins training


@dataclass(frozen=True)
class RunTimes:
    """``started``, ``last``: the times (seconds since the epoch) of the first and the latest
    event; ``seconds``: the time spent training up to the latest event; ``resumes``: how many
    times the run was resumed. All None (0) for a run without events."""

    started: float | None = None
    last: float | None = None
    seconds: float | None = None
    resumes: int = 0


def run_times(run: RunDir) -> RunTimes:
    """:class:`RunTimes` of ``run``, read from its events; an event without a time is
    skipped."""
    times = [(float(e["time"]), str(e.get("event", ""))) for e in run.events()
             if isinstance(e.get("time"), (int, float)) and not isinstance(e["time"], bool)]
    if not times:
        return RunTimes()
    seconds, begun, previous, resumes = 0.0, times[0][0], times[0][0], 0
    for time, kind in times[1:]:
        if kind in STARTS:
            seconds += previous - begun
            begun = time
            resumes += kind == "resume"
        previous = time
    seconds += previous - begun
    return RunTimes(times[0][0], previous, seconds, resumes)
