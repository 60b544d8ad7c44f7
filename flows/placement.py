"""Training the PPO placement agent (SPEC §11): rollout batches as tasks (threads, or a Dask
cluster with `--dask`), the flow alone writes the warehouse and the artifact.

`train_placement` is the whole job: read the cluster's nodes and pods, train, replay the whole
cluster with the trained agent in both modes, publish the artifact (TorchScript, model card,
checksums), register it in `policies` (algorithm PPO) and store the two replays in
`placement_runs`. Without Dask it runs inline (no Prefect server needed); with Dask it runs as the
`placement-ppo-train` flow whose rollouts are Prefect tasks on the Dask task runner.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timezone

from metapilot.flows.runners import task_runner
from prefect import flow, task
from prefect.cache_policies import NONE


@task(name="placement-rollout", cache_policy=NONE, persist_result=False)
def rollout_task(cluster, w, typical, rollout) -> dict:
    """One batch of training episodes with the given weights (plain data in, plain arrays out)."""
    from metapilot.models.placement.train import collect

    return collect(cluster, w, typical, rollout)


def train_placement(cluster: str, db: str | None = None, config: dict | None = None,
                    submit: bool = False, log: Callable[[str], None] | None = None) -> dict:
    """Train, evaluate, publish, register, store; returns the policy id, its folder and the results.
    `submit`: run each rollout batch as a task of the current flow's task runner."""
    from metapilot.models.placement.artifact import publish, registry_row, scripted_chooser
    from metapilot.models.placement.engine import typical_pods
    from metapilot.models.placement.ppo import PPOConfig
    from metapilot.models.placement.run import load_cluster, refuse_without_gpus, replay_agent, torch_threads
    from metapilot.models.placement.train import collect, train
    from metapilot.warehouse.db import connect, writer_lock
    from metapilot.warehouse.placement_store import load_nodes, load_pods, pods_digest, store_run
    from metapilot.warehouse.policy_store import register_placement

    cfg = PPOConfig.from_dict(config or {})
    con = connect(db, read_only=True)
    try:
        c, w = load_cluster(con, cluster)
        refuse_without_gpus(c, cluster)  # before any training: one sentence, not numpy's
        nodes, pods = load_nodes(con, cluster), load_pods(con, cluster)
    finally:
        con.close()
    typical = typical_pods(w)

    def map_fn(tasks: list) -> list[dict]:
        if submit:
            futures = [rollout_task.submit(c, w, typical, t) for t in tasks]
            return [f.result() for f in futures]
        return [collect(c, w, typical, t) for t in tasks]

    with torch_threads(1):  # small matrices on a shared machine: one thread is fastest and deterministic
        result = train(c, w, cfg, map_fn=map_fn, typical=typical, log=log)
    choose = scripted_chooser(result.net)
    evaluation = {}
    for mode in ("time", "inflate"):
        evaluation[mode] = replay_agent(c, w, choose, "ppo", mode, cfg.seed, typical)
    t = pods["creation_s"].drop_nulls()
    data = {"nodes": len(c.names), "gpus": int(c.ngpu.sum()), "pods": w.n, "sha256": pods_digest(nodes, pods),
            "from": datetime.fromtimestamp(float(t.min()) if t.len() else 0.0, timezone.utc).isoformat(),
            "to": datetime.fromtimestamp(float(t.max()) if t.len() else 0.0, timezone.utc).isoformat()}
    training = {"decisions": result.steps, "seconds": round(result.seconds, 1), "converged_at": result.converged_at,
                "updates": len(result.history), "history": result.history, "rollouts": "Dask/threads" if submit else "inline",
                "checkpoint": result.selected, "checkpoints": result.selection, "starts": result.starts,
                "checkpoint_s": round(result.select_seconds, 1)}
    art = publish(result.net, result.config, db=db, cluster=cluster, training=training,
                  evaluation={m: {k: v for k, v in r.items() if k != "curve"} for m, r in evaluation.items()}, data=data)
    runs = {}
    with writer_lock(db):
        con = connect(db)
        try:
            register_placement(con, registry_row(art))
            for mode, r in evaluation.items():
                r["policy"] = art.policy_id
                runs[mode] = store_run(con, cluster, r)
        finally:
            con.close()
    return {"policy_id": art.policy_id, "path": str(art.folder), "training": {k: v for k, v in training.items()
                                                                              if k != "history"},
            "evaluation": evaluation, "run_ids": runs}


@flow(name="placement-ppo-train")
def ppo_train_flow(cluster: str, db: str | None = None, config: dict | None = None) -> dict:
    """`train_placement` with the rollouts as tasks of this flow's task runner."""
    from prefect import get_run_logger

    logger = get_run_logger()
    return train_placement(cluster, db, config, submit=True, log=logger.info)


def run_placement_training(cluster: str, db: str | None = None, config: dict | None = None, dask: str | None = None,
                           log: Callable[[str], None] | None = None) -> dict:
    """Inline without Dask; with Dask (an address or local:N) as a flow on the Dask task runner
    (the caller opens the Prefect session: `metapilot.cli.batch.prefect_session`)."""
    if not dask:
        return train_placement(cluster, db, config, submit=False, log=log)
    return ppo_train_flow.with_options(task_runner=task_runner(dask))(cluster, db, config)
