"""The controller's actions: the objectives the scheduling engine can be switched between.

The action of an epoch is an index into `OBJECTIVES`. Each objective is a queue ordering plus a
backfilling mode; the simulator's objective-switching engine implements exactly these, and the
as-run history is labelled with the objective whose ordering best matches the real start order
(`models.controller.asrun`). Both sides use `sort_keys` / `queue_order` from this module.

**W — user first.** Queue ordered oldest first: priority by current wait, i.e. submit time
ascending (SPEC §6's FCFS rule `s`), ties by job id. Backfilling: EASY (textbook: the head gets
a reservation at the shadow time, later jobs start now only if they do not delay it).

**U — system first.** At each scheduling step, with the free cores/GPUs/memory of that moment:
jobs that fit the free resources now go first; within each group, largest area first
(SPEC §6's LAF rule `-r*n`, r = requested time, n = requested cores), then submit time, then
job id. Backfilling: EASY over that order. So U packs the idle resources greedily with the
biggest work that fits, and only then protects the first job that does not fit (the EASY head).
The "fits now" flag is computed once per scheduling step, against the free resources before
that step starts any job (the simulator snapshots it when the step begins).

Lower key = scheduled earlier. Keys are plain numpy (no Python objects) so that numba code
can mirror them one to one.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

OBJECTIVES: tuple[str, ...] = ("U", "W")
U, W = 0, 1  # action indices


@dataclass(frozen=True)
class Objective:
    """What an action means to the scheduling engine."""

    name: str
    meaning: str
    priority_rule: str  # SPEC §6 rule name the ordering builds on
    fit_now_first: bool  # jobs that fit the free resources now go before the rest
    backfill: str  # none | easy | conservative

    def describe(self) -> str:
        first = "jobs that fit now first, then " if self.fit_now_first else ""
        return f"{self.meaning} ({first}{self.priority_rule} order, {self.backfill.upper()} backfilling)"


OBJECTIVE_SPECS: dict[str, Objective] = {
    "U": Objective("U", "system first: keep the free resources filled", "LAF", True, "easy"),
    "W": Objective("W", "user first: oldest / longest-waiting first", "FCFS", False, "easy"),
}


def action_meanings() -> dict[int, str]:
    """Action index -> description, for the model card and `advise`."""
    return {i: OBJECTIVE_SPECS[name].describe() for i, name in enumerate(OBJECTIVES)}


def fits_now(
    cores: np.ndarray, gpus: np.ndarray, mem: np.ndarray,
    free_cores: float, free_gpus: float, free_mem: float,
) -> np.ndarray:
    """A job fits when all three of its requests fit the free resources (unknown memory = 0)."""
    return (
        (np.asarray(cores) <= free_cores)
        & (np.asarray(gpus) <= free_gpus)
        & (np.nan_to_num(np.asarray(mem, dtype=np.float64)) <= free_mem)
    )


def sort_keys(
    objective: int | str,
    *,
    submit_s: np.ndarray,
    req_time_s: np.ndarray,
    cores: np.ndarray,
    gpus: np.ndarray,
    mem: np.ndarray,
    job_seq: np.ndarray,
    free_cores: float,
    free_gpus: float,
    free_mem: float,
) -> tuple[np.ndarray, ...]:
    """Sort keys of the queue under `objective`, most significant first (lower = earlier).

    `job_seq` is a numeric tie-breaker standing for the job id (e.g. its arrival sequence).
    Feed `keys[::-1]` to `np.lexsort`, or use `queue_order`.
    """
    name = OBJECTIVES[objective] if isinstance(objective, (int, np.integer)) else objective
    submit = np.asarray(submit_s, dtype=np.float64)
    seq = np.asarray(job_seq, dtype=np.float64)
    if name == "W":
        return (submit, seq)
    if name == "U":
        area = np.asarray(req_time_s, dtype=np.float64) * np.asarray(cores, dtype=np.float64)
        fit = fits_now(cores, gpus, mem, free_cores, free_gpus, free_mem)
        return ((~fit).astype(np.float64), -area, submit, seq)
    raise ValueError(f"unknown objective {objective!r}; known: {OBJECTIVES}")


def queue_order(objective: int | str, **queue) -> np.ndarray:
    """Indices of the queue in scheduling order under `objective` (see `sort_keys`)."""
    keys = sort_keys(objective, **queue)
    return np.lexsort(keys[::-1])
