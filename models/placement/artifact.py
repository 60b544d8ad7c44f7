"""The PPO placement agent's artifact (SPEC §9, §11), like the controller's: one folder per
policy under `<database folder>/policies/<policy_id>/`, checked on every load.

- `policy.pt`: TorchScript of the scoring network. Input: float32 node rows `(k, len(node
  features))` of the nodes where the pod fits and the global features `(len(global features),)`,
  in the model card's order; output: `(k,)` scores. The agent puts the pod on the highest.
- `model.pt`: the weights, a dict of tensors (`torch.load(weights_only=True)`); nothing is unpickled.
- `model_card.json`: settings, features, reward, training (seed, decisions, time, history),
  evaluation results, code version.
- `SHA256SUMS`: sums of the files above; its own hash is in the `policies` row (algorithm `PPO`).
"""

from __future__ import annotations

import json
import platform
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import torch

from metapilot.ground.files import publish_folder, safe_name, sums_problem
from metapilot.ground.version import code_version
from metapilot.models.controller.artifact import (
    ArtifactIntegrityError,
    json_default,
    no_jit_deprecation,
    find_policy,
    policies_dir,
    weights_digest,
)
from metapilot.models.placement import kernels as K
from metapilot.models.placement.ppo import PPOConfig, Scorer, feature_doc
from metapilot.models.placement.rollout import GLOBAL_FEATURES, N_GLOBAL, Obs

FILES = ("policy.pt", "model.pt", "model_card.json")
ALGORITHM = "PPO"


@dataclass
class PlacementArtifact:
    policy_id: str
    folder: Path
    card: dict
    sums_sha256: str


def script_scorer(net: Scorer):
    """The network as TorchScript (torch only, no MetaPilot code needed to run it)."""
    net = net.eval()
    with torch.no_grad(), no_jit_deprecation():
        traced = torch.jit.trace(net, (torch.zeros(3, K.N_NODE_FEATURES), torch.zeros(N_GLOBAL)), check_trace=False)
        return torch.jit.freeze(traced.eval())


def scripted_chooser(net: Scorer) -> Callable[[Obs], int]:
    """The deterministic agent of a trained network, through the TorchScript the artifact holds (so
    the replays recorded at training are the artifact's)."""
    scripted = script_scorer(net)

    def choose(obs: Obs) -> int:
        with torch.inference_mode():
            return int(np.argmax(scripted(torch.from_numpy(obs.rows), torch.from_numpy(obs.glob)).numpy()))

    return choose


def build_card(policy_id: str, cluster: str, cfg: PPOConfig, *, created_at: datetime, training: dict,
               evaluation: dict, data: dict) -> dict:
    """The model card as a plain dict."""
    return {
        "policy_id": policy_id,
        "kind": "placement",
        "algorithm": {"name": "PPO (clipped surrogate, GAE), shared per-node scoring network, masked softmax",
                      "key": ALGORITHM},
        "created_at": created_at.isoformat(),
        "cluster": cluster,
        "data": data,
        "features": feature_doc(),
        "actions": "one of the nodes where the pod fits (CPU, memory, GPU count and milli-GPU, GPU model); "
                   "the others are masked. Deterministic use: the highest score; a GPU-share pod takes the "
                   "GPU that FGD would choose on that node.",
        "reward": {"formula": "per pod: -w_load * load_diff - queue_base ** min(queue_len, queue_cap) "
                              "+ w_success * success * size",
                   "load_diff": "standard deviation of node utilisation (mean of CPU and GPU allocated shares) after the pod",
                   "size": "1 (success_unit 'pod', the seed's) or the pod's GPUs over the list's mean "
                           "GPU pod ('gpu')",
                   "constants": cfg.reward.__dict__,
                   "defined_in": "models/placement/rollout.py (PlacementRewardConfig)"},
        "hyper_parameters": cfg.to_dict(),
        "training": training,
        "evaluation": evaluation,
        "files": {"policy.pt": f"TorchScript; input float32 node rows (k, {K.N_NODE_FEATURES}) in features.node "
                               f"order and global features ({N_GLOBAL},) in features.global order; output (k,) scores",
                  "model.pt": "network weights (state_dict), torch.load(weights_only=True)"},
        "code_version": code_version(),
        "runtime": {"python": platform.python_version(), "torch": torch.__version__, "machine": platform.machine()},
    }


def publish(net: Scorer, cfg: PPOConfig, *, db: str | Path | None, cluster: str, training: dict, evaluation: dict,
            data: dict, created_at: datetime | None = None) -> PlacementArtifact:
    """Write the policy folder; the id ends with a digest of the weights (same training, same id)."""
    created_at = created_at or datetime.now(timezone.utc)
    state = {k: v.detach().clone() for k, v in net.state_dict().items()}
    digest = weights_digest({"scorer": state})
    policy_id = f"{safe_name(cluster)}-placement-ppo-{digest[:10]}"
    card = build_card(policy_id, cluster, cfg, created_at=created_at, training=training, evaluation=evaluation,
                      data=data)
    card["weights_sha256"] = digest
    def write(tmp: Path) -> None:
        torch.save(state, tmp / "model.pt")
        scripted = script_scorer(net)
        with no_jit_deprecation():
            torch.jit.save(scripted, str(tmp / "policy.pt"))
        (tmp / "model_card.json").write_text(json.dumps(card, indent=2, default=json_default))

    final, sums = publish_folder(policies_dir(db), policy_id, write, FILES)
    return PlacementArtifact(policy_id, final, card, sums)


def registry_row(art: PlacementArtifact) -> dict:
    """The `policies` row of a placement policy (sql/policies/register_placement.sql)."""
    c = art.card
    d = c["data"]
    ev = c["evaluation"].get("inflate") or {}
    return {"policy_id": art.policy_id, "cluster": c["cluster"], "partition": "*",
            "created_at": datetime.fromisoformat(c["created_at"]), "path": str(art.folder),
            "train_from": datetime.fromisoformat(d["from"]), "train_to": datetime.fromisoformat(d["to"]),
            "algorithm": ALGORITHM, "n_steps": int(c["training"]["decisions"]), "seed": int(c["hyper_parameters"]["seed"]),
            "n_train_tuples": int(c["training"]["decisions"]), "dataset_sha256": d["sha256"], "sums_sha256": art.sums_sha256,
            "replay_score": ev.get("gpu_alloc_share"), "code_version": c["code_version"]}


def verify(folder: str | Path, expected_sums_sha256: str | None = None) -> None:
    """Check every file against SHA256SUMS (and that file against the registry); raise if not."""
    problem = sums_problem(folder, FILES, expected_sums_sha256)
    if problem:
        raise ArtifactIntegrityError(
            f"{problem} The artifact was modified or corrupted after it was published; do not use it. Restore the "
            f"folder from a backup, or retrain: `metapilot place train ...` (then delete {folder}).")


class PlacementAgent:
    """A loaded, verified placement policy: the TorchScript scorer and its card."""

    def __init__(self, folder: Path, module, card: dict) -> None:
        self.folder, self.module, self.card = folder, module, card
        self.policy_id: str = card["policy_id"]

    def scores(self, obs: Obs) -> np.ndarray:
        with torch.inference_mode():
            return self.module(torch.from_numpy(obs.rows), torch.from_numpy(obs.glob)).numpy()

    def choose(self, obs: Obs) -> int:
        """The row (of the observation) the agent puts the pod on: the highest score."""
        return int(np.argmax(self.scores(obs)))


def load_agent(folder: str | Path, expected_sums_sha256: str | None = None) -> PlacementAgent:
    """Verify the folder, check its features are this code's, load `policy.pt` (no pickle)."""
    folder = Path(folder)
    verify(folder, expected_sums_sha256)
    card = json.loads((folder / "model_card.json").read_text())
    if card.get("kind") != "placement":
        raise ValueError(f"{folder}: not a placement policy (use it with `metapilot advise` / `validate`)")
    feats = card["features"]
    if feats["node"] != list(K.NODE_FEATURES) or feats["global"] != list(GLOBAL_FEATURES):
        raise ValueError(f"{folder}: trained on other features ({feats['node']}, {feats['global']}) than this "
                         "version computes: retrain it with `metapilot place train`")
    with no_jit_deprecation():
        module = torch.jit.load(str(folder / "policy.pt"), map_location="cpu")
    return PlacementAgent(folder, module.eval(), card)


__all__ = ["PlacementAgent", "PlacementArtifact", "publish", "registry_row", "verify", "load_agent", "script_scorer",
           "scripted_chooser", "find_policy", "FILES", "ALGORITHM"]
