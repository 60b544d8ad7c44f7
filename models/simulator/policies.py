"""The seven priority rules of SPEC §6 as integer codes and one score function numba can call.

Lower score runs first; ties go to the earlier submit time, then the job id, which in a
`Workload` is simply the lower job index (jobs are stored in that order). Scores use the real
wait `w = now - submit`, not RLScheduler's `-1 - s`.

Numba's on-disk cache keys each compiled function on its own file only: after changing `score`,
clear `models/simulator/__pycache__` (or touch engine.py) so the engine is recompiled with it.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

FCFS, SJF, SAF, LAF, WFP3, UNICEF, F1 = range(7)

POLICY_CODES: dict[str, int] = {
    "FCFS": FCFS, "SJF": SJF, "SAF": SAF, "LAF": LAF, "WFP3": WFP3, "UNICEF": UNICEF, "F1": F1,
}
POLICIES: tuple[str, ...] = tuple(POLICY_CODES)

# Rules whose score depends on the current time; the others can be computed once per job.
DYNAMIC: frozenset[int] = frozenset({WFP3, UNICEF})


def policy_code(name: str | int) -> int:
    """Map a rule name (case-insensitive) or code to its code; raise on anything else."""
    if isinstance(name, int):
        if 0 <= name < len(POLICIES):
            return name
        raise ValueError(f"unknown policy code {name}")
    try:
        return POLICY_CODES[name.upper()]
    except KeyError:
        raise ValueError(f"unknown policy {name!r}; choose from {', '.join(POLICIES)}") from None


@nb.njit(cache=True, inline="always")
def is_dynamic(code: int) -> bool:
    return code == WFP3 or code == UNICEF


@nb.njit(cache=True)
def score(code: int, submit: float, req: float, cores: float, now: float) -> float:
    """Priority score of one job (lower first). `submit` is seconds since the window start."""
    if code == FCFS:
        return submit
    if code == SJF:
        return req
    if code == SAF:
        return req * cores
    if code == LAF:
        return -req * cores
    if code == WFP3:
        x = (now - submit) / req
        return -(x * x * x) * cores
    if code == UNICEF:
        lg = math.log2(cores) if cores > 2.0 else 1.0  # n = 1 (or 2) counts as log2(2) = 1
        return -(now - submit) / (lg * req)
    # F1 (Carastan-Santos & de Camargo 2017): s is seconds since the window start, plus one.
    s = submit + 1.0
    if s < 1.0:
        s = 1.0  # a job submitted before the window start: treat as at the start
    return math.log10(req) * cores + 870.0 * math.log10(s)


@nb.njit(cache=True)
def static_scores(submit, req, cores):
    """(n, 7) table of every rule's score at time 0; only the static rules' columns are used."""
    n = submit.shape[0]
    out = np.zeros((n, 7))
    for j in range(n):
        for code in range(7):
            if not is_dynamic(code):
                out[j, code] = score(code, submit[j], req[j], cores[j], 0.0)
    return out


@nb.njit(cache=True)
def scores_at(code, submit, req, cores, now):
    """Scores of many jobs under one rule at time `now` (the as-run labelling's orderings)."""
    n = submit.shape[0]
    out = np.empty(n)
    for j in range(n):
        out[j] = score(code, submit[j], req[j], cores[j], now)
    return out
