"""Shared by the validation / report / ROI tests: a real KTH-SP2 warehouse (the bundled sample,
ingested without Prefect), a registered policy row, and a stand-in for the objective-switching
replay until `models.controller.replay.replay_objectives` exists (the real one is used as soon
as it imports: `objective_replay()`)."""

from __future__ import annotations

import time
import warnings
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
KTH = REPO / "samples" / "logs" / "swf" / "KTH-SP2-1996-2.1-cln.swf.gz"
CLUSTER = "KTH-SP2"
UTC = timezone.utc
# A small real window: "train" on the first three weeks, validate on the three that follow (the
# default held-out window is as long as training): Mondays 00:00 UTC.
TRAIN_FROM = datetime(1996, 9, 30, tzinfo=UTC)
TRAIN_TO = datetime(1996, 10, 21, tzinfo=UTC)
VALID_TO = datetime(1996, 11, 11, tzinfo=UTC)
POLICY_ID = "kth-test-policy"


def kth_warehouse(path: Path | None = None):
    """Warehouse (in memory, or the file `path`) with the whole KTH-SP2 sample (28,476 jobs,
    100 cores from the SWF header)."""
    from metapilot.warehouse.db import connect, connect_memory
    from metapilot.warehouse.ingest import IngestOptions, ingest_file

    con = connect_memory() if path is None else connect(path)
    rep = ingest_file(con, KTH, IngestOptions(), bytes(range(32)))
    assert rep.outcome == "loaded", rep.message
    from metapilot.warehouse.ingest import infer_missing_capacity

    infer_missing_capacity(con)  # a no-op here: the SWF header gives the capacity
    return con


def insert_policy(con, policy_id: str = POLICY_ID, train_from: datetime = TRAIN_FROM, train_to: datetime = TRAIN_TO,
                  path: str = "/nonexistent/policy", sums_sha256: str = "none") -> None:
    """A `policies` row (by default pointing at no artifact: the controller cannot be loaded)."""
    con.execute(
        "INSERT INTO policies (policy_id, cluster, partition, created_at, path, train_from, train_to, algorithm, "
        "n_steps, seed, n_train_tuples, dataset_sha256, sums_sha256, code_version) "
        "VALUES (?, ?, '*', ?, ?, ?, ?, 'cql', 1, 0, 1, 'x', ?, 'test')",
        [policy_id, CLUSTER, datetime.now(UTC), path, train_from, train_to, sums_sha256],
    )


def stub_replay_objectives(workload, capacity, objective_per_epoch, epoch_s: int = 3600):
    """Stand-in with the real hook's signature: U ~ LAF+EASY, W = FCFS+EASY, switched per epoch on
    the engine; a callable gets the SPEC §7 state of each epoch boundary (transforms.state)."""
    from metapilot.models.simulator import SimResult
    from metapilot.models.simulator.engine import Engine
    from metapilot.transforms.state import state_from_aggregates

    rules = {0: "LAF", 1: "FCFS"}
    t0 = time.perf_counter()
    first = objective_per_epoch if isinstance(objective_per_epoch, int) else 1
    eng = Engine(workload, capacity, rules[first], "easy")
    cap = capacity.matrix.sum(axis=0)
    origin = int(workload.window_start.timestamp())
    t = 0.0
    while not eng.done:
        if callable(objective_per_epoch):
            q = eng.queue_view()
            used = eng.used().sum(axis=0)
            n = len(q["job"])
            state = state_from_aggregates(
                epoch_start=origin + int(t), used_cpu=used[0], used_gpu=used[1], used_mem=used[2],
                cap_cpu=cap[0], cap_gpu=cap[1], cap_mem=cap[2] if np.isfinite(cap[2]) else 0.0,
                queue_len=n, queued_cpu=q["cores"].sum(), queued_gpu=q["gpus"].sum(), queued_mem=q["mem"].sum(),
                wait_mean_s=q["wait"].mean() if n else 0.0, wait_max_s=q["wait"].max() if n else 0.0,
                long_tail_share=(q["wait"] > 86_400).mean() if n else 0.0,
                req_mean_s=q["req"].mean() if n else 0.0,
                arrivals=int(((workload.submit >= t - epoch_s) & (workload.submit < t)).sum()),
            )[0]
            a = int(objective_per_epoch(state))
        else:
            a = int(objective_per_epoch)
        t += epoch_s
        eng.advance(t, policy=rules[a])
    pool = eng.jobs.pool.copy()
    pool[eng.cannot_fit] = -1
    counters = dict(workload.report.as_dict()) if workload.report is not None else {}
    counters["cannot_fit"] = int(eng.cannot_fit.size)
    return SimResult(workload=workload, capacity=capacity, policy="switching" if callable(objective_per_epoch) else rules[a],
                     backfill="easy", start=eng.start.copy(), end=eng.end.copy(), pool=pool, cannot_fit=eng.cannot_fit,
                     wall_s=time.perf_counter() - t0, events=0, counters=counters)


QUEUE_LEN_THRESHOLD = float(np.log10(6) / 3)  # the queue_len feature of 5 queued jobs is log10(6) / 3


def stub_controller(state: np.ndarray) -> int:
    """Wait-first (W) when more than 5 jobs queue, utilisation-first (U) otherwise."""
    from metapilot.transforms.state import FEATURE_NAMES

    state = np.asarray(state).reshape(-1)
    return int(state[FEATURE_NAMES.index("queue_len")] > QUEUE_LEN_THRESHOLD + 1e-6)


def write_test_artifact(root: Path, policy_id: str) -> tuple[Path, str]:
    """A published-policy folder the real loader accepts (models.controller.artifact): a TorchScript
    `policy.pt` whose Q-values pick W exactly when `stub_controller` does, the other files, and
    SHA256SUMS. Returns the folder and the SHA-256 of SHA256SUMS (the `policies` row's anchor)."""
    import json

    import torch
    from metapilot.ground.files import SUMS, sha256_file
    from metapilot.models.controller.artifact import FILES
    from metapilot.transforms.state import FEATURE_NAMES, StateConfig

    qi = FEATURE_NAMES.index("queue_len")

    class QueueRule(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            q = x[:, qi]
            return torch.stack([torch.full_like(q, QUEUE_LEN_THRESHOLD + 1e-6), q], dim=1)

    folder = root / policy_id
    folder.mkdir(parents=True)
    with warnings.catch_warnings():  # TorchScript is what the artifact format uses, deprecated or not
        warnings.simplefilter("ignore", DeprecationWarning)
        traced = torch.jit.trace(QueueRule().eval(), torch.zeros(2, len(FEATURE_NAMES)))
        torch.jit.save(traced, str(folder / "policy.pt"))
    torch.save({}, folder / "model.pt")
    (folder / "d3rlpy_config.json").write_text("{}")
    # two Q-values: the seed's two-objective menu (U, W)
    (folder / "model_card.json").write_text(json.dumps({"policy_id": policy_id,
                                                      "state": {"config": StateConfig(menu=("U", "W")).to_dict()}}))
    (folder / SUMS).write_text("".join(f"{sha256_file(folder / n)}  {n}\n" for n in FILES))
    return folder, sha256_file(folder / SUMS)


def objective_replay():
    """The real objective-switching replay when it exists, else the stub: (function, is_real)."""
    try:
        from metapilot.models.controller.replay import replay_objectives
    except ImportError:
        return stub_replay_objectives, False
    return replay_objectives, True
