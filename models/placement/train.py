"""PPO for node placement, CleanRL-style in one file: collect whole episodes with the current
weights (`collect`, one call per rollout task: inline, threads or Dask workers, the caller's
`map_fn` decides), then `epochs` passes of clipped-surrogate updates over shuffled minibatches of
decisions (`update`). Everything is drawn from the config's seed: the same seed and settings give
the same weights.

The seed's schedule (SPEC §11): uniform random nodes for the first `random_steps` decisions, then
epsilon-greedy around the sampled policy; the learning rate x `lr_decay` whenever the mean reward
per decision moves by more than `reward_jump` from one update to the next; training stops (the
agent is deterministic from then on) once the update's KL has stayed under `kl_stop` for
`kl_patience` updates.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import torch

from metapilot.models.placement import kernels as K
from metapilot.models.placement.engine import Cluster, Workload, typical_pods
from metapilot.models.placement.ppo import NumpyScorer, PPOConfig, Scorer, build_scorer, load_state, numpy_state
from metapilot.models.placement.rollout import N_GLOBAL, Obs, sample_env
from metapilot.models.placement.select import Reference, Snapshot, select


@dataclass
class RolloutTask:
    """What one rollout task needs besides the cluster and the pods: plain data, any worker can run it."""

    state: dict
    config: dict
    seed: int
    start_step: int
    n_steps: int


def _sample(rng: np.random.Generator, p: np.ndarray) -> int:
    c = np.cumsum(p)
    return int(min(np.searchsorted(c, rng.random() * c[-1], side="right"), p.size - 1))


def _policy(net: NumpyScorer, obs: Obs) -> tuple[np.ndarray, float, np.ndarray]:
    """Log-probabilities of the observation's rows, its value, its count-weighted mean row."""
    counts = obs.counts.astype(np.float64)
    mean_row = (obs.rows * (counts / counts.sum())[:, None]).sum(0).astype(np.float32)
    logits = net.scores(obs.rows, obs.glob).astype(np.float64) + np.log(counts)
    m = logits.max()
    logp = logits - (m + np.log(np.exp(logits - m).sum()))
    return logp, net.value(obs.glob, mean_row), mean_row


def collect(cluster: Cluster, w: Workload, typical: tuple, task: RolloutTask) -> dict:
    """Whole training episodes with the task's weights until `n_steps` decisions are reached."""
    cfg = PPOConfig.from_dict(task.config)
    net = NumpyScorer(task.state)
    rng = np.random.default_rng(task.seed)
    rows, counts, glob, mean_rows, act, logp, val, rew, done = [], [], [], [], [], [], [], [], []
    episodes = []
    step = empty = 0
    t0 = time.perf_counter()
    while step < task.n_steps:
        if empty >= 50:
            raise ValueError("50 training episodes in a row without a decision: no pod of the list fits the "
                             f"sampled nodes ({cfg.episode_nodes} of the cluster's); raise episode_nodes or check "
                             "the node list and the pods' GPU models")
        env = sample_env(cluster, w, typical, rng, episode_nodes=cfg.episode_nodes, time_share=cfg.time_share,
                         time_pods=cfg.time_pods, reward=cfg.reward, inflate_to=cfg.inflate_to)
        obs, _ = env.reset()
        ret, n = 0.0, 0
        while obs is not None:
            lp, v, mr = _policy(net, obs)
            if rng.random() < cfg.epsilon(task.start_step + step):
                a = _sample(rng, obs.counts.astype(np.float64))
            else:
                a = _sample(rng, np.exp(lp))
            rows.append(obs.rows)
            counts.append(obs.counts)
            glob.append(obs.glob)
            mean_rows.append(mr)
            act.append(a)
            logp.append(lp[a])
            val.append(v)
            obs, r = env.act(int(obs.nodes[a]))
            rew.append(r)
            done.append(obs is None)
            ret += r
            n += 1
            step += 1
        empty = 0 if n else empty + 1
        if n:
            res = env.result("ppo-train")
            episodes.append({"mode": env.mode, "nodes": len(env.cluster.names), "decisions": n, "return": ret,
                             "placed": res["placed"], "failed": res["failed"], "imbalance": res["imbalance"],
                             "gpu_alloc_share": res["gpu_alloc_share"]})
    sizes = np.array([r.shape[0] for r in rows], np.int64)
    return {"rows": np.concatenate(rows) if rows else np.zeros((0, K.N_NODE_FEATURES), np.float32),
            "counts": np.concatenate(counts) if counts else np.zeros(0, np.int64), "sizes": sizes,
            "glob": np.stack(glob) if glob else np.zeros((0, N_GLOBAL), np.float32),
            "mean_rows": np.stack(mean_rows) if mean_rows else np.zeros((0, K.N_NODE_FEATURES), np.float32),
            "act": np.array(act, np.int64), "logp": np.array(logp, np.float64), "val": np.array(val, np.float64),
            "rew": np.array(rew, np.float64), "done": np.array(done, bool), "episodes": episodes,
            "seconds": time.perf_counter() - t0}


def _merge(parts: Sequence[dict]) -> dict:
    out = {k: np.concatenate([p[k] for p in parts]) for k in parts[0] if k not in ("episodes", "seconds")}
    out["episodes"] = [e for p in parts for e in p["episodes"]]
    out["seconds"] = max(p["seconds"] for p in parts)
    return out


def gae(rew: np.ndarray, val: np.ndarray, done: np.ndarray, gamma: float, lam: float) -> tuple[np.ndarray, np.ndarray]:
    """Advantages and returns; every batch ends with a finished episode (value 0 after it)."""
    adv = np.zeros_like(rew)
    last = 0.0
    for t in range(rew.size - 1, -1, -1):
        nxt = 0.0 if done[t] else val[t + 1]
        nonterm = 0.0 if done[t] else 1.0
        delta = rew[t] + gamma * nxt - val[t]
        last = delta + gamma * lam * nonterm * last
        adv[t] = last
    return adv, adv + val


def _segment_logp(net: Scorer, rows, seg, glob, logc, act_idx, n_seg: int, entropy: bool):
    """Log-probability of each decision's action (a row: its nodes' probabilities summed) and, when
    asked, the entropy of the decision's distribution over nodes."""
    s = net.scores(rows, glob[seg])
    logits = s + logc
    m = torch.full((n_seg,), -torch.inf).scatter_reduce(0, seg, logits.detach(), "amax", include_self=True)
    z = torch.zeros(n_seg).index_add(0, seg, torch.exp(logits - m[seg]))
    lse = m + torch.log(z)
    logp = logits[act_idx] - lse
    if not entropy:
        return logp, None
    p = torch.exp(logits - lse[seg])  # a row's share: count x the probability of each of its nodes
    return logp, -torch.zeros(n_seg).index_add(0, seg, p * (s - lse[seg]))


def update(net: Scorer, opt: torch.optim.Optimizer, batch: dict, cfg: PPOConfig, rng: np.random.Generator) -> dict:
    """`epochs` passes of PPO's clipped surrogate (and the value loss) over the batch."""
    adv, ret = gae(batch["rew"], batch["val"], batch["done"], cfg.gamma, cfg.gae_lambda)
    n = adv.size
    sizes = batch["sizes"]
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    rows_all = torch.from_numpy(batch["rows"])
    logc_all = torch.from_numpy(np.log(batch["counts"].astype(np.float32)))
    glob_all = torch.from_numpy(batch["glob"])
    mean_all = torch.from_numpy(batch["mean_rows"])
    pol_params = list(net.linear.parameters()) + list(net.mlp.parameters())
    val_params = list(net.v.parameters())
    kls, pg_losses, v_losses, clipfracs = [], [], [], []
    net.train()
    for _ in range(cfg.epochs):
        perm = rng.permutation(n)
        for lo in range(0, n, cfg.minibatch):
            mb = np.sort(perm[lo:lo + cfg.minibatch])
            sz = sizes[mb]
            idx = np.concatenate([np.arange(offsets[i], offsets[i + 1]) for i in mb])
            seg = torch.from_numpy(np.repeat(np.arange(mb.size), sz))
            starts = np.concatenate([[0], np.cumsum(sz)[:-1]])
            act_idx = torch.from_numpy(starts + batch["act"][mb])
            logp, ent = _segment_logp(net, rows_all[idx], seg, glob_all[mb], logc_all[idx], act_idx, mb.size,
                                       cfg.ent_coef > 0)
            old = torch.from_numpy(batch["logp"][mb]).float()
            a = torch.from_numpy(adv[mb]).float()
            a = (a - a.mean()) / (a.std() + 1e-8) if mb.size > 1 else a
            logratio = logp - old
            ratio = torch.exp(logratio)
            pg = torch.max(-a * ratio, -a * torch.clamp(ratio, 1 - cfg.clip, 1 + cfg.clip)).mean()
            v = net.value(glob_all[mb], mean_all[mb])
            v_loss = 0.5 * ((v - torch.from_numpy(ret[mb]).float()) ** 2).mean()
            loss = pg + cfg.vf_coef * v_loss - (cfg.ent_coef * ent.mean() if ent is not None else 0.0)
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(pol_params, cfg.max_grad_norm)
            torch.nn.utils.clip_grad_norm_(val_params, cfg.max_grad_norm)
            opt.step()
            with torch.no_grad():
                kls.append(float(((ratio - 1) - logratio).mean()))
                clipfracs.append(float(((ratio - 1).abs() > cfg.clip).float().mean()))
            pg_losses.append(float(pg.detach()))
            v_losses.append(float(v_loss.detach()))
    net.eval()
    return {"kl": float(np.mean(kls[-max(1, len(kls) // cfg.epochs):])), "pg_loss": float(np.mean(pg_losses)),
            "v_loss": float(np.mean(v_losses)), "clipfrac": float(np.mean(clipfracs))}


MapFn = Callable[[list[RolloutTask]], list[dict]]


@dataclass
class PPOResult:
    net: Scorer
    config: PPOConfig
    history: list[dict] = field(default_factory=list)
    steps: int = 0
    seconds: float = 0.0
    converged_at: int | None = None  # the decision count where the KL switch made the agent deterministic
    selected: str | None = None  # the snapshot kept (`models/placement/select.py`); None: the last weights
    selection: list[dict] = field(default_factory=list)  # every snapshot's replays against the heuristics
    starts: list[dict] = field(default_factory=list)  # the same for the candidate starting policies
    select_seconds: float = 0.0


def numpy_chooser(state: dict) -> Callable[[Obs], int]:
    """The deterministic agent of a snapshot's weights (numpy: the checkpoint replays' hot loop)."""
    net = NumpyScorer(state)
    return lambda obs: int(np.argmax(net.scores(obs.rows, obs.glob)))


def train(cluster: Cluster, w: Workload, cfg: PPOConfig, *, map_fn: MapFn | None = None,
          typical: tuple | None = None, log: Callable[[str], None] | None = None) -> PPOResult:
    """Train the agent on a cluster's node list and pods. `map_fn(tasks)` runs the rollout tasks,
    each `collect(cluster, w, typical, task)` (inline by default; the placement flow submits them to
    its task runner: threads or Dask)."""
    t0 = time.perf_counter()
    typical = typical if typical is not None else typical_pods(w)
    map_fn = map_fn or (lambda tasks: [collect(cluster, w, typical, t) for t in tasks])
    ref = Reference.of(cluster, w, typical, [cfg.seed + 1 + i for i in range(cfg.select_seeds)]) \
        if cfg.select_every else None
    starts: list[dict] = []
    kept_start: list[dict] = []  # the replays of the start kept: the weights of the snapshot before training
    if ref is not None and len(cfg.priors) > 1:
        ts = time.perf_counter()
        snaps = [Snapshot(f"start {i}", 0, numpy_state(build_scorer(replace(cfg, prior=dict(p)))))
                 for i, p in enumerate(cfg.priors)]
        best, starts = select(cluster, w, snaps, numpy_chooser, typical, ref, prefer_latest=False, log=log)
        for row, p in zip(starts, cfg.priors, strict=True):
            row["prior"] = dict(p)
        cfg = replace(cfg, prior=dict(cfg.priors[best]))
        kept_start = [starts[best]]
        if log:
            log(f"starting policy {cfg.prior} ({time.perf_counter() - ts:.0f} s)")
    net = build_scorer(cfg)
    opt = torch.optim.Adam(net.parameters(), lr=cfg.lr, eps=1e-5)
    rng = np.random.default_rng(cfg.seed)
    result = PPOResult(net, cfg, starts=starts)
    lr, prev_reward, calm = cfg.lr, None, 0
    it = 0
    snapshots = [Snapshot("prior", 0, numpy_state(net))]
    while result.steps < cfg.total_steps:
        state = numpy_state(net)
        if cfg.select_every and it and it % cfg.select_every == 0:
            snapshots.append(Snapshot(f"update {it}", result.steps, state))
        per = max(1, -(-min(cfg.rollout_steps, cfg.total_steps - result.steps) // cfg.n_rollouts))
        tasks = [RolloutTask(state, cfg.to_dict(), int(np.random.SeedSequence([cfg.seed, it, i]).generate_state(1)[0]),
                             result.steps + i * per, per) for i in range(cfg.n_rollouts)]
        tr = time.perf_counter()
        batch = _merge(map_fn(tasks))
        t_roll = time.perf_counter() - tr
        tu = time.perf_counter()
        stats = update(net, opt, batch, cfg, rng)
        result.steps += int(batch["act"].size)
        mean_r = float(batch["rew"].mean())
        if prev_reward is not None and abs(mean_r - prev_reward) > cfg.reward_jump * max(abs(prev_reward), 1e-9):
            lr *= cfg.lr_decay
            for g in opt.param_groups:
                g["lr"] = lr
        prev_reward = mean_r
        explored = cfg.epsilon(result.steps) <= cfg.eps_min
        calm = calm + 1 if explored and stats["kl"] < cfg.kl_stop else 0
        eps = [e for e in batch["episodes"] if e["mode"] == "inflate"]
        row = {"update": it, "steps": result.steps, "reward_mean": mean_r, "lr": lr,
               "epsilon": cfg.epsilon(result.steps), "rollout_s": round(t_roll, 2),
               "update_s": round(time.perf_counter() - tu, 2), "episodes": len(batch["episodes"]),
               "inflate_alloc": float(np.mean([e["gpu_alloc_share"] or 0 for e in eps])) if eps else None,
               "inflate_imbalance": float(np.mean([e["imbalance"] or 0 for e in eps])) if eps else None, **stats}
        result.history.append(row)
        if log:
            log(f"update {it}: {result.steps:,} decisions, reward/decision {mean_r:.4f}, kl {stats['kl']:.4f}, "
                f"lr {lr:.2e}, rollout {t_roll:.1f}s, update {row['update_s']:.1f}s")
        it += 1
        if cfg.kl_patience and calm >= cfg.kl_patience:
            result.converged_at = result.steps
            break
    if ref is not None:
        snapshots.append(Snapshot(f"update {it}", result.steps, numpy_state(net)))
        ts = time.perf_counter()
        best, result.selection = select(cluster, w, snapshots, numpy_chooser, typical, ref, done=kept_start, log=log)
        result.selected = snapshots[best].label
        load_state(net, snapshots[best].state)
        result.select_seconds = time.perf_counter() - ts
        if log:
            log(f"kept checkpoint {result.selected} ({result.selection[best]['missed']} of 3 goals missed on the "
                f"cluster's own list; {result.select_seconds:.0f} s)")
    result.seconds = time.perf_counter() - t0
    return result


__all__ = ["PPOResult", "RolloutTask", "train", "collect", "update", "gae"]
