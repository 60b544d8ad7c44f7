"""The pipeline's stages as Prefect flows: each one a few tasks around a library call.

Writers hold the warehouse writer lock (one writer at a time, across processes); results are
cached by input (cluster, window, data fingerprint, code version) so a second run skips work
already done; transient failures (a locked database, a network blip) are retried.
"""

from __future__ import annotations

import threading
from datetime import datetime

from metapilot.flows.common import is_transient, warehouse_writer
from metapilot.flows.runners import task_runner
from prefect import flow, get_run_logger, task
from prefect.cache_policies import NONE

from metapilot.ground.version import code_version
from metapilot.warehouse.jobs_store import data_fingerprint


DEFAULT_SOURCES: tuple[str, ...] = ("as-run", "planner")  # replay rollouts: opt-in (docs/benchmarks.md, issue 11)


def _fingerprint(db: str | None, cluster: str) -> str:
    from metapilot.warehouse.db import connect

    con = connect(db)
    try:
        return data_fingerprint(con, cluster)
    finally:
        con.close()


def _key_tune(ctx, p) -> str:
    return f"tune|{p['cluster']}|{p['train'][0]}|{p['train'][1]}|{p['fingerprint']}|{code_version()}"


@task(name="tune-planner", cache_key_fn=_key_tune, persist_result=True, result_serializer="json",
      retries=2, retry_delay_seconds=5, retry_condition_fn=is_transient)
def tune_task(db: str | None, cluster: str, train: tuple[datetime, datetime], fingerprint: str) -> dict:
    """The planner's horizon, lam and guard, and the reward's lam, chosen on the training window."""
    from metapilot.models.controller.tuning import tune_window
    from metapilot.warehouse.db import connect

    con = connect(db)
    try:
        return tune_window(con, cluster, train[0], train[1], log=get_run_logger().info).to_dict()
    finally:
        con.close()


@flow(name="tune")
def tune_flow(cluster: str, train: tuple[datetime, datetime], db: str | None = None) -> dict:
    """Tune the lookahead planner (the teacher and a held-out contender) on the training window."""
    return tune_task(db, cluster, train, _fingerprint(db, cluster))


def dataset_config(sources: tuple[str, ...], tuning: dict | None):
    """The dataset's configuration: the sources, and the tuned planner and reward lam."""
    from metapilot.models.controller.dataset import DatasetConfig
    from metapilot.models.controller.tuning import apply_tuning

    return apply_tuning(DatasetConfig(sources=tuple(sources)), tuning)


def _tuning_digest(tuning: dict | None) -> str:
    """A short digest of what the tuning decided (the planner and the reward lam) for cache keys."""
    import hashlib
    import json

    if not tuning:
        return "untuned"
    doc = json.dumps({"planner": tuning.get("planner"), "reward_lam": tuning.get("reward_lam")}, sort_keys=True)
    return hashlib.sha256(doc.encode()).hexdigest()[:12]


def _key_dataset(ctx, p) -> str:
    return (f"dataset|{p['cluster']}|{p['train'][0]}|{p['train'][1]}|{p['valid'][0]}|{p['valid'][1]}|"
            f"{','.join(p['sources'])}|{_tuning_digest(p.get('tuning'))}|{p['fingerprint']}|{code_version()}")


@task(name="build-dataset", cache_key_fn=_key_dataset, persist_result=True, result_serializer="json",
      retries=2, retry_delay_seconds=5, retry_condition_fn=is_transient)
def build_dataset_task(db: str | None, cluster: str, train: tuple[datetime, datetime], valid: tuple[datetime, datetime],
                       sources: tuple[str, ...], fingerprint: str, tuning: dict | None = None) -> dict:
    """Tuples of the train and checkpoint windows, stored in `mdp_transitions`; returns a summary."""
    from metapilot.models.controller.dataset import build_dataset
    from metapilot.warehouse.db import connect

    with warehouse_writer(db, log=get_run_logger().info):
        con = connect(db)
        try:
            splits = build_dataset(con, cluster, train[0], train[1], valid[0], valid[1],
                                   config=dataset_config(sources, tuning))
        finally:
            con.close()
    return splits.summary()


@flow(name="build_dataset")
def build_dataset_flow(cluster: str, train: tuple[datetime, datetime], valid: tuple[datetime, datetime],
                       db: str | None = None, sources: tuple[str, ...] = DEFAULT_SOURCES,
                       tuning: dict | None = None) -> dict:
    summary = build_dataset_task(db, cluster, train, valid, tuple(sources), _fingerprint(db, cluster), tuning)
    get_run_logger().info("dataset for %s: %s train / %s checkpoint tuples", cluster,
                          summary["train"].get("tuples"), summary["checkpoint"].get("tuples"))
    return summary


# d3rlpy and torch seed process-wide RNGs: two seeds trained in threads of one process would draw
# from each other's, so in a process they take turns (on Dask workers, processes, they run side by side).
_SEEDED_FIT = threading.Lock()


@task(name="train-seed", cache_policy=NONE)
def train_seed_task(splits, config, evaluator):
    """One seed's training run (pure compute: no warehouse access, so it can run on any worker)."""
    from metapilot.models.controller.objectives import Menu
    from metapilot.models.controller.train import train_policy

    with _SEEDED_FIT:
        return train_policy(splits.train, splits.checkpoint, config, replay_evaluator=evaluator,
                            menu=Menu.of(splits.state))


def _key_train(ctx, p) -> str:
    # the flow checks that a cached policy still exists on disk before trusting it
    return (f"train|{p['cluster']}|{p['train'][0]}|{p['train'][1]}|{p['valid'][0]}|{p['valid'][1]}|{p['seeds']}|"
            f"{p['steps']}|{p['sources']}|{p['baselines']}|{_tuning_digest(p.get('tuning'))}|{p['fingerprint']}|"
            f"{code_version()}")


@task(name="train-and-publish-artifact", cache_key_fn=_key_train, persist_result=True, result_serializer="json",
      retries=1, retry_condition_fn=is_transient)
def train_task(db: str | None, cluster: str, train: tuple[datetime, datetime], valid: tuple[datetime, datetime],
               seeds: tuple[int, ...], steps: int, fingerprint: str, sources: tuple[str, ...] = DEFAULT_SOURCES,
               baselines: tuple[str, ...] = ("bc", "dqn", "bcq"), tuning: dict | None = None) -> str:
    """Train one policy per seed in parallel, keep the best by replay score (else OPE), write its
    artifact and registry row; returns the policy id."""
    from metapilot.models.controller.artifact import publish
    from metapilot.models.controller.dataset import TupleRequest, build_dataset
    from metapilot.models.controller.train import TrainConfig
    from metapilot.warehouse.db import connect

    log = get_run_logger()
    con = connect(db)
    try:
        cfg = dataset_config(sources, tuning)
        splits = build_dataset(con, cluster, train[0], train[1], valid[0], valid[1], config=cfg, store=False, reuse=True)
        evaluator = None
        try:
            from metapilot.models.controller.tuning import tuning_weeks
            from metapilot.models.evaluation.checkpoint import make_replay_evaluator

            evaluator = make_replay_evaluator(con, TupleRequest(cluster, None, valid[0], valid[1], cfg.state, cfg.reward, 0,
                                                                cfg.planner), training=tuning_weeks(*train),
                                              tuning=tuning)
        except ModuleNotFoundError:
            log.warning("replay evaluator unavailable: checkpoints chosen by off-policy estimates only")
    finally:
        con.close()
    futures = [train_seed_task.submit(splits, TrainConfig(n_steps=steps, n_steps_per_epoch=max(1, steps // 5),
                                                          fqe_steps=max(500, steps // 3), seed=s, baselines=tuple(baselines),
                                                          show_progress=False), evaluator) for s in seeds]
    results = [f.result() for f in futures]

    def score(r):
        c = r.chosen
        return (c.replay or {}).get("score", c.fqe_value if c.fqe_value is not None else float("-inf"))

    best = max(results, key=score)
    log.info("seeds %s: scores %s; keeping seed %s", list(seeds), [round(score(r), 4) for r in results], best.config.seed)
    with warehouse_writer(db, log=log.info):
        con = connect(db)
        try:
            art = publish(best, splits, db=db, cluster=cluster, con=con, replay=best.chosen.replay, tuning=tuning)
        finally:
            con.close()
    return art.policy_id


@flow(name="train")
def train_flow(cluster: str, train: tuple[datetime, datetime], valid: tuple[datetime, datetime], db: str | None = None,
               seeds: tuple[int, ...] = (0, 1), steps: int = 3000, dask: str | None = None,
               baselines: tuple[str, ...] = ("bc", "dqn", "bcq"), sources: tuple[str, ...] = DEFAULT_SOURCES,
               tuning: dict | None = None) -> str:
    """Multi-seed offline training (parallel tasks: threads here, Dask when configured)."""
    from metapilot.models.controller.artifact import find_policy
    from metapilot.warehouse.db import connect

    con = connect(db)
    try:
        fp = data_fingerprint(con, cluster)
    finally:
        con.close()
    policy_id = train_task(db, cluster, train, valid, tuple(seeds), steps, fp, sources=tuple(sources),
                           baselines=tuple(baselines), tuning=tuning)
    try:
        find_policy(policy_id, db)
    except (FileNotFoundError, LookupError):
        get_run_logger().warning("cached policy %s is gone from disk: training again", policy_id)
        policy_id = train_task.with_options(refresh_cache=True)(db, cluster, train, valid, tuple(seeds), steps, fp,
                                                                sources=tuple(sources), baselines=tuple(baselines),
                                                                tuning=tuning)
    return policy_id


def _key_heldout(ctx, p) -> str:
    return f"heldout|{p['policy_id']}|{p['start']}|{p['end']}|{p['fingerprint']}|{code_version()}"


@task(name="heldout-replay", cache_key_fn=_key_heldout, persist_result=True, result_serializer="json",
      retries=2, retry_delay_seconds=5, retry_condition_fn=is_transient)
def heldout_task(db: str | None, policy_id: str, start: datetime | None, end: datetime | None, fingerprint: str) -> str:
    from metapilot.models.evaluation.heldout import run_heldout
    from metapilot.warehouse.db import connect

    with warehouse_writer(db, log=get_run_logger().info):
        con = connect(db)
        try:
            return run_heldout(con, policy_id, start, end, db=db, log=get_run_logger().info)
        finally:
            con.close()


@flow(name="heldout")
def heldout_flow(policy_id: str, db: str | None = None, start: datetime | None = None,
                  end: datetime | None = None) -> str:
    """Replay the held-out window under the controller, fixed U/W, the 21 baselines and as-run."""
    from metapilot.warehouse.db import connect
    from metapilot.warehouse.policy_store import policy_row

    con = connect(db)
    try:
        fp = data_fingerprint(con, policy_row(con, policy_id)["cluster"])
    finally:
        con.close()
    return heldout_task(db, policy_id, start, end, fp)


def _gate_decision(con, policy_id: str, db: str | None) -> tuple[dict, str, str | None, str]:
    """The publish gate's verdict on a trained policy, from its model card (SPEC §7): the card,
    and (kind, recommendation, message)."""
    from metapilot.models.controller.artifact import find_policy, load_card
    from metapilot.models.controller.gate import publish_decision
    from metapilot.warehouse.policy_store import policy_row

    card = load_card(find_policy(policy_id, db), expected_sums_sha256=policy_row(con, policy_id).get("sums_sha256"))
    kind, recommendation, message = publish_decision(card.get("gate"), card.get("gate_training"), card.get("ope"))
    return card, kind, recommendation, message


@task(name="promote-policy", cache_policy=NONE, retries=2, retry_delay_seconds=5, retry_condition_fn=is_transient)
def promote_task(db: str | None, policy_id: str, heldout_id: str | None) -> dict:
    """The publish gate (SPEC §7): the controller is published only when it passed on its
    checkpoint window (and on its last training weeks, and FQE ranks it above the logged
    behaviour); otherwise the best fixed contender of the checkpoint window is recommended."""
    from metapilot.models.controller.gate import ope_says_better
    from metapilot.models.evaluation.heldout import verdict_summary
    from metapilot.warehouse.db import connect
    from metapilot.warehouse.heldout_store import load_heldout
    from metapilot.warehouse.publish_store import promote

    log = get_run_logger()
    with warehouse_writer(db, log=log.info):
        con = connect(db)
        try:
            verdict = None
            if heldout_id:  # the held-out verdict in words, as `metapilot heldout` prints it first
                held_out = load_heldout(con, heldout_id)
                verdict = verdict_summary(held_out.table, held_out.diffs)
            card, kind, recommendation, message = _gate_decision(con, policy_id, db)
            pointer = promote(con, policy_id, heldout_id, verdict, db, kind=kind, recommendation=recommendation,
                              message=message, gate=card.get("gate"), gate_training=card.get("gate_training"),
                              ope_passes=ope_says_better(card.get("ope"))[0])
        finally:
            con.close()
    (log.info if kind == "controller" else log.warning)(message)
    return {"pointer": str(pointer), "kind": kind, "recommendation": recommendation, "message": message}


@task(name="gate-decision", cache_policy=NONE, retries=2, retry_delay_seconds=5, retry_condition_fn=is_transient)
def decide_task(db: str | None, policy_id: str) -> dict:
    """The publish gate's decision without publishing it: what a fold of the walk forward decides
    (the site's published policy is never touched by a backtest)."""
    from metapilot.warehouse.db import connect

    con = connect(db, read_only=True)
    try:
        _, kind, recommendation, message = _gate_decision(con, policy_id, db)
    finally:
        con.close()
    return {"pointer": None, "kind": kind, "recommendation": recommendation, "message": message}


@flow(name="publish")
def publish_flow(policy_id: str, heldout_id: str | None = None, db: str | None = None) -> dict:
    """Apply the publish gate: publish the controller, or recommend the best fixed contender."""
    return promote_task(db, policy_id, heldout_id)


@task(name="weekly-report", cache_policy=NONE, retries=2, retry_delay_seconds=5, retry_condition_fn=is_transient)
def report_task(db: str | None, cluster: str, week: str | None, policy_id: str | None) -> dict:
    from metapilot.models.controller.advice import score_recommendations
    from metapilot.models.reporting import build_report
    from metapilot.models.reporting.data import last_complete_week
    from metapilot.warehouse.db import connect

    from metapilot.ground.paths import beside_db

    with warehouse_writer(db, log=get_run_logger().info):
        con = connect(db)
        try:
            wk = week or last_complete_week(con, cluster)
            if policy_id:
                score_recommendations(con, policy_id, wk, db=db)
            rep = build_report(con, cluster, wk, beside_db(db, "reports"))  # also the Prefect Markdown artifact
        finally:
            con.close()
    return {"cluster": cluster, "week": wk, "files": rep["files"]}


@flow(name="weekly_report")
def weekly_report_flow(cluster: str, week: str | None = None, db: str | None = None,
                       policy_id: str | None = None) -> dict:
    """Write the weekly report (HTML, Markdown, JSON) and publish it as a Prefect artifact."""
    if policy_id is None:
        from metapilot.warehouse.db import connect
        from metapilot.warehouse.publish_store import current_policy

        con = connect(db)
        try:
            policy_id = current_policy(con, cluster)
        finally:
            con.close()
    return report_task(db, cluster, week, policy_id)


def with_runner(f, dask: str | None, db: str | None = None):
    """A flow configured with the task runner the user chose (threads, or Dask)."""
    return f.with_options(task_runner=task_runner(dask, db))
