"""Versioned policy artifacts (SPEC §9): one folder per policy, checked on every load.

`<database folder>/policies/<policy_id>/` holds:

- `policy.pt`: TorchScript. Input: float32 states `(n, n_features)` as `transforms.state` makes
  them; it standardises them itself (`(x - mean) / (std + eps)`, the training scaler) and returns
  the Q-values `(n, len(OBJECTIVES))` in reward units. Needs torch only.
- `policy.npz`: the same arithmetic as plain float32 arrays (the scaler, each Q-network's layers,
  their order), read with `numpy.load(allow_pickle=False)`: loading a policy needs neither torch
  nor d3rlpy, so a fresh `metapilot advise` does not pay torch's import (about a second). Absent
  from older folders (and for networks other than Linear/ReLU stacks): then `policy.pt` serves.
- `model.pt`: the d3rlpy networks' weights, a dict of tensors (`torch.load(weights_only=True)`);
  `d3rlpy_config.json`: the algorithm's config, to rebuild it with d3rlpy. Nothing is unpickled.
- `model_card.json`: windows, dataset hash, features and their normalisation, action meanings,
  reward constants, hyper-parameters, OPE (and replay) metrics, code version.
- `SHA256SUMS`: `sha256sum -c`-compatible sums of the files above; its own hash is kept in the
  `policies` row. Loading checks every sum first and refuses a folder that does not match.

This module imports torch lazily and never imports d3rlpy unless asked to rebuild the d3rlpy
model, so `metapilot advise` stays fast.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import platform
import warnings
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
from metapilot.models.controller.gate import behaviour_value
from metapilot.models.controller.objectives import Menu
from metapilot.transforms.reward import REWARD_FORMULAS
from metapilot.transforms.state import (
    AGGREGATES,
    N_FEATURES,
    StateConfig,
    feature_table,
    n_features,
    state_features,
)

from metapilot.ground.files import publish_folder, read_sums, safe_name, sums_problem
from metapilot.ground.paths import beside_db
from metapilot.ground.version import code_version

FILES = ("policy.pt", "model.pt", "d3rlpy_config.json", "model_card.json")
NUMPY_FILE = "policy.npz"  # optional (see the module docstring)
CONFIG_CLASSES = {"cql": "DiscreteCQLConfig", "dqn": "DoubleDQNConfig"}
D3RLPY_NAMES = {"cql": "DiscreteCQL", "dqn": "DoubleDQN (offline)", "bcq": "DiscreteBCQ", "bc": "DiscreteBC"}


class ArtifactIntegrityError(RuntimeError):
    """A policy folder whose files do not match their published SHA-256 sums."""



def policies_dir(db: str | Path | None) -> Path:
    return beside_db(db, "policies")


def weights_digest(states: dict[str, dict]) -> str:
    """SHA-256 of network weights (names and bytes): equal weights, equal digest."""
    h = hashlib.sha256()
    for mod in sorted(states):
        for name in sorted(states[mod]):
            t = states[mod][name].detach().cpu().contiguous()
            h.update(f"{mod}.{name}:{tuple(t.shape)}:{t.dtype}".encode())
            h.update(t.numpy().tobytes())
    return h.hexdigest()


# --- the TorchScript policy ----------------------------------------------------------------------


def script_policy(q_funcs, mean: np.ndarray | None, std: np.ndarray | None, eps: float, q_scale: float,
                  n_in: int = N_FEATURES):
    """A TorchScript module: states `(n, n_in)` -> Q-values in reward units, scaler included (no d3rlpy)."""
    import copy

    import torch

    class QPolicy(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.q_funcs = copy.deepcopy(q_funcs).cpu().eval()
            if mean is None or std is None:  # no standardisation: identity
                mean_t, denom_t = torch.zeros(n_in), torch.ones(n_in)
            else:  # exactly d3rlpy's StandardObservationScaler: float32 (x - mean) / (std + eps)
                mean_t = torch.tensor(np.asarray(mean), dtype=torch.float32)
                denom_t = torch.tensor(np.asarray(std), dtype=torch.float32) + eps
            self.register_buffer("mean", mean_t)
            self.register_buffer("denom", denom_t)
            self.q_scale = float(q_scale)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            z = (x - self.mean) / self.denom
            q = torch.stack([f(z).q_value for f in self.q_funcs], dim=0).mean(dim=0)
            return q * self.q_scale

    module = QPolicy().eval()
    with torch.no_grad(), no_jit_deprecation():
        traced = torch.jit.trace(module, torch.zeros(2, n_in), check_trace=False)
        return torch.jit.freeze(traced.eval())


def policy_arrays(q_funcs, mean: np.ndarray | None, std: np.ndarray | None, eps: float, q_scale: float,
                  n_in: int = N_FEATURES) -> dict[str, np.ndarray] | None:
    """`script_policy`'s arithmetic as arrays for `numpy_q_values`: per Q-network `q{i}_ops` (the
    layer kinds in order) and `q{i}_w{j}`/`q{i}_b{j}` (each Linear, transposed). None when a
    network holds a layer other than Linear, ReLU or Dropout (then only the TorchScript serves)."""
    import torch

    if mean is None or std is None:
        mean_a, denom_a = np.zeros(n_in, np.float32), np.ones(n_in, np.float32)
    else:  # as script_policy: float32 mean, float32 std + eps
        mean_a = np.asarray(mean, dtype=np.float32)
        denom_a = (torch.tensor(np.asarray(std), dtype=torch.float32) + eps).numpy()
    out = {"mean": mean_a, "denom": denom_a, "q_scale": np.asarray(q_scale, dtype=np.float32),
           "n_q": np.asarray(len(q_funcs))}
    for i, f in enumerate(q_funcs):
        encoder = getattr(f, "encoder", None)
        layers = list(getattr(encoder, "_layers", [])) + [getattr(f, "_fc", None)]
        ops = []
        for m in layers:
            if isinstance(m, torch.nn.Linear):
                j = len(ops)
                out[f"q{i}_w{j}"] = m.weight.detach().cpu().numpy().T.astype(np.float32)
                out[f"q{i}_b{j}"] = m.bias.detach().cpu().numpy().astype(np.float32)
                ops.append("linear")
            elif isinstance(m, torch.nn.ReLU):
                ops.append("relu")
            elif isinstance(m, torch.nn.Dropout):  # the identity in evaluation
                continue
            else:
                return None
        out[f"q{i}_ops"] = np.asarray(ops)
    return out


def numpy_q_values(arrays: dict[str, np.ndarray], x: np.ndarray) -> np.ndarray:
    """Q-values of states `x` (n, n_features) from `policy_arrays` (float32, as the TorchScript)."""
    z = (x - arrays["mean"]) / arrays["denom"]
    qs = []
    for i in range(int(arrays["n_q"])):
        h = z
        for j, op in enumerate(arrays[f"q{i}_ops"]):
            h = h @ arrays[f"q{i}_w{j}"] + arrays[f"q{i}_b{j}"] if op == "linear" else np.maximum(h, 0.0)
        qs.append(h)
    q = qs[0] if len(qs) == 1 else np.mean(np.stack(qs), axis=0, dtype=np.float32)
    return (q * arrays["q_scale"]).astype(np.float32, copy=False)


@contextlib.contextmanager
def no_jit_deprecation():
    """torch 2.10+ flags TorchScript as deprecated; SPEC §9 asks for it (torch.export is the successor)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=DeprecationWarning, message=r".*torch\.jit.*")
        yield


class ScriptedPolicy:
    """A loaded (and verified) policy: Q-values and actions from `policy.npz` (numpy) or, where a
    folder has none, `policy.pt` (TorchScript), plus its card."""

    def __init__(self, folder: Path, module: Any, card: dict, arrays: dict[str, np.ndarray] | None = None) -> None:
        self.folder = folder
        self.module = module
        self.arrays = arrays
        self.card = card
        self.policy_id: str = card["policy_id"]
        self.state_config = StateConfig(**card["state"]["config"])
        self.n_features = n_features(self.state_config)
        self.feature_names = tuple(f.name for f in state_features(self.state_config))

    def q_values(self, states: np.ndarray) -> np.ndarray:
        """Q-values `(n, n_actions)` in reward units for states `(n, n_features)`."""
        if self.arrays is not None:
            return numpy_q_values(self.arrays, np.asarray(states, dtype=np.float32).reshape(-1, self.n_features))
        import torch

        x = torch.from_numpy(np.ascontiguousarray(states, dtype=np.float32).reshape(-1, self.n_features))
        with torch.inference_mode():
            return self.module(x).numpy()

    def act(self, states: np.ndarray) -> np.ndarray:
        return np.argmax(self.q_values(states), axis=1)


# --- writing -------------------------------------------------------------------------------------


@dataclass
class Artifact:
    policy_id: str
    folder: Path
    card: dict
    sums_sha256: str


def build_card(result, splits, *, policy_id: str, cluster: str, partition: str | None, created_at: datetime,
               dataset_sha256: str, replay: dict | None, tuning: dict | None = None) -> dict:
    """The model card (SPEC §9) as a plain dict."""
    from metapilot.models.controller.dataset import window_days

    cfg = result.config
    st = splits.train
    menu = Menu.of(splits.state)
    return {
        "policy_id": policy_id,
        "created_at": created_at.isoformat(),
        "cluster": cluster,
        "partition": partition or "*",
        "training_window": {"from": splits.train_window[0].isoformat(), "to": splits.train_window[1].isoformat(),
                            "days": round(window_days(splits.train_window), 3)},
        "checkpoint_window": (
            {"from": splits.checkpoint_window[0].isoformat(), "to": splits.checkpoint_window[1].isoformat(),
             "days": round(window_days(splits.checkpoint_window), 3)} if splits.checkpoint_window else None
        ),
        "checkpoint_source": result.checkpoint_source,
        "dataset": {
            "sha256": dataset_sha256,
            "state_spec": splits.spec,
            "n_train_tuples": result.n_train,
            "n_checkpoint_tuples": result.n_checkpoint,
            "older_tuples_mixed_in": splits.older_mixed,
            "sources": sorted(set(st["source"].to_list())) if st.height else [],
            "summary": splits.summary(),
        },
        "state": {
            "config": splits.state.to_dict(),
            "aggregates": list(AGGREGATES),
            "features": feature_table(splits.state),
            "defined_in": "transforms/state.py (state_from_aggregates)",
            "observation_scaler": {
                "formula": "(x - mean) / (std + eps), applied inside policy.pt",
                "mean": [float(v) for v in result.scaler_mean] if cfg.standardize else None,
                "std": [float(v) for v in result.scaler_std] if cfg.standardize else None,
                "eps": cfg.scaler_eps if cfg.standardize else 0.0,
            },
        },
        "actions": {
            str(i): {"name": o.name, "meaning": o.describe(), "priority_rule": o.priority_rule,
                     "fit_now_first": o.fit_now_first, "backfill": o.backfill}
            for i, o in enumerate(menu.specs)
        },
        "reward": {
            "formula": REWARD_FORMULAS[splits.reward.kind],
            "constants": splits.reward.to_dict(),
            "defined_in": "transforms/reward.py (reward_from_aggregates)",
        },
        "algorithm": {"name": D3RLPY_NAMES[result.algorithm], "key": result.algorithm,
                      "d3rlpy_config": json.loads(result.algo.config.serialize())},
        "hyper_parameters": cfg.to_dict(),
        "q_values": {"units": "reward units (d3rlpy Q x q_scale)", "q_scale": result.q_scale, "gamma": cfg.gamma},
        "ope": {
            "method": "DiscreteFQE on the checkpoint tuples; value = mean over states of Q_fqe(s, pi(s))",
            "chosen": result.chosen.to_dict(),
            "candidates": [c.to_dict() for c in result.candidates],
            "baselines": {k: v.to_dict() for k, v in result.baselines.items()},
            "behaviour_mc_return": result.behaviour_mc_return,
        },
        "replay": replay,
        "gate": (replay or {}).get("gate"),
        "gate_training": ((replay or {}).get("training") or {}).get("gate"),
        "planner": splits.planner.to_dict(),
        "tuning": tuning,
        "timings_s": {k: round(v, 3) for k, v in result.seconds.items()},
        "files": {
            "policy.pt": f"TorchScript; input float32 (n, {n_features(splits.state)}) states in the order of "
                         f"state.features; "
                         f"output (n, {len(menu)}) Q-values, argmax = recommended objective",
            "model.pt": "d3rlpy network weights: {module: state_dict}, load with torch.load(weights_only=True)",
            "d3rlpy_config.json": "algorithm config for d3rlpy (deserialize + create_impl + load model.pt)",
        },
        "feature_names": [f.name for f in state_features(splits.state)],
        "code_version": code_version(),
        "runtime": _runtime(),
    }


def _runtime() -> dict:
    """Python, the machine, and the libraries `metapilot --version` names (duckdb, polars, prefect,
    great-expectations, d3rlpy, torch): what the policy was trained with."""
    from metapilot.ground.version import dependency_versions

    return {"python": platform.python_version(), "machine": platform.machine(), **dependency_versions()}


def publish(
    result,
    splits,
    *,
    db: str | Path | None,
    cluster: str,
    partition: str | None = None,
    con=None,
    replay: dict | None = None,
    created_at: datetime | None = None,
    tuning: dict | None = None,
) -> Artifact:
    """Write the policy folder and its `policies` row; return where it went.

    The policy id ends with a digest of the weights, so the same training gives the same id
    (re-publishing replaces the folder and the row).
    """
    import torch
    from metapilot.models.controller.dataset import dataset_hash
    from metapilot.models.controller.train import module_states

    created_at = created_at or datetime.now(timezone.utc)
    states = module_states(result.algo)
    digest = weights_digest(states)
    part = safe_name(partition or "all")
    policy_id = f"{safe_name(cluster)}-{part}-{result.algorithm}-{splits.train_window[1]:%Y%m%d}-{digest[:10]}"
    ds_hash = dataset_hash(splits.train)
    card = build_card(result, splits, policy_id=policy_id, cluster=cluster, partition=partition,
                      created_at=created_at, dataset_sha256=ds_hash, replay=replay, tuning=tuning)
    card["weights_sha256"] = digest

    def write(tmp: Path) -> None:
        torch.save(states, tmp / "model.pt")
        (tmp / "d3rlpy_config.json").write_text(json.dumps({
            "algorithm": result.algorithm,
            "config_class": CONFIG_CLASSES[result.algorithm],
            "config": json.loads(result.algo.config.serialize()),
            "observation_shape": [n_features(splits.state)],
            "action_size": len(splits.state.menu),
        }, indent=2))
        with no_jit_deprecation():
            torch.jit.save(script_policy(*net), str(tmp / "policy.pt"))
        if arrays is not None:
            np.savez(tmp / NUMPY_FILE, **arrays)
        (tmp / "model_card.json").write_text(json.dumps(card, indent=2, default=json_default))

    mods = result.algo.impl.modules
    net = (mods.q_funcs, result.scaler_mean if result.config.standardize else None,
           result.scaler_std if result.config.standardize else None, result.config.scaler_eps, result.q_scale,
           n_features(splits.state))
    arrays = policy_arrays(*net)
    final, sums_sha = publish_folder(policies_dir(db), policy_id, write,
                                     FILES + ((NUMPY_FILE,) if arrays is not None else ()))
    if con is not None:
        register(con, card, final, sums_sha, result)
    return Artifact(policy_id, final, card, sums_sha)


def json_default(o: Any) -> Any:
    if isinstance(o, (np.floating, np.integer)):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, datetime):
        return o.isoformat()
    raise TypeError(f"not JSON serialisable: {type(o)}")


def register(con, card: dict, folder: Path, sums_sha: str, result) -> None:
    """Insert (or replace) the policy's row in `policies`."""
    vw = card.get("checkpoint_window", card.get("validation_window")) or {}  # older cards: its old name
    replay = card.get("replay") or {}
    row = {
        "policy_id": card["policy_id"], "cluster": card["cluster"], "partition": card["partition"],
        "created_at": datetime.fromisoformat(card["created_at"]), "path": str(folder),
        "train_from": datetime.fromisoformat(card["training_window"]["from"]),
        "train_to": datetime.fromisoformat(card["training_window"]["to"]),
        "valid_from": datetime.fromisoformat(vw["from"]) if vw else None,
        "valid_to": datetime.fromisoformat(vw["to"]) if vw else None,
        "algorithm": card["algorithm"]["key"], "n_steps": int(result.config.n_steps), "seed": int(result.config.seed),
        "n_train_tuples": int(result.n_train), "dataset_sha256": card["dataset"]["sha256"], "sums_sha256": sums_sha,
        "fqe_value": result.chosen.fqe_value,
        "behaviour_value": behaviour_value(card["ope"]),
        "replay_score": replay.get("score"), "menu": ",".join(card["state"]["config"]["menu"]),
        "action_shares": json.dumps(result.chosen.action_shares),
        "code_version": card["code_version"],
    }
    from metapilot.warehouse.policy_store import register_controller  # not on the advise path's imports

    register_controller(con, row)


# --- loading -------------------------------------------------------------------------------------


def verify(folder: str | Path, expected_sums_sha256: str | None = None) -> None:
    """Check every file of a policy folder against SHA256SUMS (and SHA256SUMS against the registry).

    Raises ArtifactIntegrityError naming the file, the expected and the actual hash.
    """
    folder = Path(folder)
    remedy = ("The artifact was modified or corrupted after it was published; do not use it. "
              f"Restore the folder from a backup, or retrain: `metapilot train ...` (then delete {folder}).")
    problem = sums_problem(folder, files_of(folder), expected_sums_sha256)
    if problem is not None:
        raise ArtifactIntegrityError(f"{problem} {remedy}")


def files_of(folder: Path) -> tuple[str, ...]:
    """The files a folder's sums must cover: `policy.npz` too where it is there or listed."""
    optional = NUMPY_FILE in read_sums(folder) or (folder / NUMPY_FILE).exists()
    return FILES + ((NUMPY_FILE,) if optional else ())


def find_policy(policy_id: str, db: str | Path | None = None) -> Path:
    """The folder of a policy id (clear error when it is not there)."""
    if "/" in policy_id or policy_id.startswith("."):
        raise ValueError(f"invalid policy id {policy_id!r}")
    folder = policies_dir(db) / policy_id
    if not folder.is_dir():
        root = policies_dir(db)
        known = sorted(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")) if root.exists() else []
        hint = f" Known: {', '.join(known[:10])}" if known else " Train one with `metapilot train`."
        raise FileNotFoundError(f"no policy {policy_id!r} under {root}.{hint}")
    return folder


def load_card(folder: str | Path, verify_sums: bool = True, expected_sums_sha256: str | None = None) -> dict:
    folder = Path(folder)
    if verify_sums:
        verify(folder, expected_sums_sha256)
    return json.loads((folder / "model_card.json").read_text())


def load_policy(folder: str | Path, expected_sums_sha256: str | None = None, *,
                torchscript: bool = False) -> ScriptedPolicy:
    """Verify the folder, then load `policy.npz` (numpy; no torch, no d3rlpy, no pickle) or, where
    there is none or when asked (`torchscript`), `policy.pt` (TorchScript)."""
    folder = Path(folder)
    card = load_card(folder, True, expected_sums_sha256)
    if not torchscript and (folder / NUMPY_FILE).exists():
        with np.load(folder / NUMPY_FILE, allow_pickle=False) as z:
            return ScriptedPolicy(folder, None, card, {k: z[k] for k in z.files})
    import torch

    with no_jit_deprecation():
        module = torch.jit.load(str(folder / "policy.pt"), map_location="cpu")
    module.eval()
    policy = ScriptedPolicy(folder, module, card)
    for _ in range(3):  # TorchScript optimises on its first calls: pay that at load, not per decision
        policy.q_values(np.zeros((1, policy.n_features), dtype=np.float32))
    return policy


def load_d3rlpy(folder: str | Path, device: str = "cpu", expected_sums_sha256: str | None = None):
    """Verify the folder and rebuild the d3rlpy algorithm from its config and weights."""
    import torch
    from metapilot.models.controller.d3 import import_d3rlpy
    from metapilot.models.controller.train import load_module_states

    folder = Path(folder)
    verify(folder, expected_sums_sha256)
    import_d3rlpy()
    import d3rlpy.algos as algos

    meta = json.loads((folder / "d3rlpy_config.json").read_text())
    if meta["config_class"] not in CONFIG_CLASSES.values():
        raise ArtifactIntegrityError(f"{folder}: unexpected config class {meta['config_class']!r}")
    cls = getattr(algos, meta["config_class"])
    algo = cls.deserialize(json.dumps(meta["config"])).create(device=device)
    algo.create_impl(tuple(meta["observation_shape"]), int(meta["action_size"]))
    states = torch.load(folder / "model.pt", map_location=device, weights_only=True)
    load_module_states(algo, states)
    return algo
