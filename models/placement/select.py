"""Which of a training's checkpoints the placement artifact keeps: the placement counterpart of
the controller's publish gate (SPEC §7, §11).

PPO follows its reward, and the seed's reward (placed pods, balance) can pull a good packing
policy towards spreading: on a list of multi-GPU pods it learns to place many small pods and
fail the large ones, allocating less of the GPUs than FGD. So the training keeps snapshots of the
agent (its starting point included) and each is replayed deterministically on the cluster's own
node list and pods, in both modes, against every heuristic; so is each of a few fixed starting
policies before training (the same candidates for every list: the one kept is where PPO
starts). A snapshot meets the goals when, in `time` mode, no heuristic is at least as good on
both failed pods and imbalance and better on one, and, in `inflate` mode (mean over `seeds`, drawn apart from any benchmark's), it allocates
at least `alloc_share` of FGD's GPU allocation with a lower imbalance than FGD's. The kept one
meets the most goals, then has the widest margin on the inflate goals up to `SAFE_MARGIN` (the
smaller of its allocation's slack over `alloc_share` x FGD's and its imbalance's under FGD's:
the goals are checked again on seeds it never saw); among equals, the latest (the most trained).
The whole table goes into the model card.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from metapilot.models.placement.engine import POLICIES, Cluster, Workload, replay
from metapilot.models.placement.rollout import Obs, PlacementEnv, play

ALLOC_SHARE = 0.98  # inflate: the agent's GPU allocation at least this share of FGD's
SAFE_MARGIN = 0.01  # margins above 1% count alike: the spread of allocation between inflate seeds is
# 0.1-1.4 percentage points (docs/benchmarks.md), so a wider one buys nothing on unseen seeds
REFERENCE = "fgd"


@dataclass(frozen=True)
class Snapshot:
    """An agent's weights at one point of training."""

    label: str  # "prior" (before any update) or "update N"
    steps: int  # decisions trained on
    state: dict


def dominated_by(agent: dict, heuristics: dict[str, dict]) -> list[str]:
    """Heuristics at least as good as the agent on (failed pods, imbalance) and better on one."""
    out = []
    for name, m in heuristics.items():
        if m["failed"] <= agent["failed"] and m["imbalance"] <= agent["imbalance"] and (
                m["failed"] < agent["failed"] or m["imbalance"] < agent["imbalance"]):
            out.append(name)
    return out


def verdict(time_run: dict, inflate_mean: dict, heur_time: dict[str, dict], ref_inflate: dict,
            alloc_share: float = ALLOC_SHARE) -> dict:
    """The goals of one agent's replays, and how many it misses."""
    dom = dominated_by(time_run, heur_time)
    ref_alloc = ref_inflate["gpu_alloc_share"] or 0.0
    alloc = inflate_mean["gpu_alloc_share"] or 0.0
    ref_imb = ref_inflate["imbalance"] or 0.0
    imb = inflate_mean["imbalance"] or 0.0
    alloc_ok = alloc >= alloc_share * ref_alloc
    imb_ok = imb < ref_imb
    margin = min(alloc / (alloc_share * ref_alloc) - 1.0 if ref_alloc > 0 else 0.0,
                 1.0 - imb / ref_imb if ref_imb > 0 else 0.0)
    return {"dominated_by": dom, "alloc": alloc, "alloc_ref": ref_alloc, "alloc_ok": alloc_ok, "margin": margin,
            "imbalance": inflate_mean["imbalance"], "imbalance_ref": ref_inflate["imbalance"], "imbalance_ok": imb_ok,
            "time_failed": time_run["failed"], "time_imbalance": time_run["imbalance"],
            "missed": int(bool(dom)) + int(not alloc_ok) + int(not imb_ok)}


def mean_inflate(runs: Sequence[dict]) -> dict:
    """The inflate metrics the goals read, averaged over seeds."""
    return {k: float(np.mean([r[k] or 0.0 for r in runs])) for k in ("gpu_alloc_share", "imbalance", "failed")}


@dataclass(frozen=True)
class Reference:
    """What the snapshots are held against: every heuristic in time mode, FGD in inflate mode."""

    seeds: tuple[int, ...]
    heur_time: dict
    ref_inflate: dict

    @classmethod
    def of(cls, cluster: Cluster, w: Workload, typical: tuple, seeds: Sequence[int]) -> Reference:
        return cls(tuple(seeds), {p: replay(cluster, w, p, "time", 0, typical) for p in POLICIES},
                   mean_inflate([replay(cluster, w, REFERENCE, "inflate", s, typical) for s in seeds]))


def select(cluster: Cluster, w: Workload, snapshots: Sequence[Snapshot],
           chooser: Callable[[dict], Callable[[Obs], int]], typical: tuple, ref: Reference, *,
           prefer_latest: bool = True, done: Sequence[dict] = (),
           log: Callable[[str], None] | None = None) -> tuple[int, list[dict]]:
    """The index of the snapshot to keep, and every snapshot's verdict (see the module docstring;
    among equals the latest, or the first with `prefer_latest=False`). `chooser(state)`: the
    deterministic agent of a snapshot's weights; `done`: the verdicts of the first snapshots,
    already replayed (the starting policy kept: the same weights as the snapshot before training)."""
    seeds = ref.seeds
    rows = [dict(d) | {"snapshot": s.label, "steps": s.steps} for d, s in zip(done, snapshots, strict=False)]
    for snap in snapshots[len(rows):]:
        choose = chooser(snap.state)
        t = play(PlacementEnv(cluster, w, "time", 0, typical), choose, "ppo")
        inf = mean_inflate([play(PlacementEnv(cluster, w, "inflate", s, typical), choose, "ppo") for s in seeds])
        v = verdict(t, inf, ref.heur_time, ref.ref_inflate) | {"snapshot": snap.label, "steps": snap.steps}
        rows.append(v)
        if log:
            log(f"checkpoint {snap.label}: time failed {v['time_failed']:,} / imbalance {v['time_imbalance']:.4f} "
                f"(dominated by {', '.join(v['dominated_by']) or 'none'}); inflate allocation {100 * v['alloc']:.2f}% "
                f"(FGD {100 * v['alloc_ref']:.2f}%), imbalance {v['imbalance']:.4f} (FGD {v['imbalance_ref']:.4f})")
    best = min(range(len(rows)), key=lambda i: (rows[i]["missed"], -min(rows[i]["margin"], SAFE_MARGIN),
                                                 -i if prefer_latest else i))
    return best, rows


__all__ = ["Snapshot", "Reference", "select", "verdict", "dominated_by", "mean_inflate", "ALLOC_SHARE"]
