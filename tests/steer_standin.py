"""A stand-in Slurm for the steering tests and benchmark: `squeue --json`, `sinfo --json`,
`scontrol` (updates read on stdin, `-o show partition`, `show config`), `sprio` and `sdiag`, answering from a
JSON state file as Slurm 22.05 does, counting every call and every update line.

    make_bin(folder, state_path) -> the bin folder to give `steer --slurm-bin` / SlurmCli(bin_dir=...)
State: {"jobs": [...22.05 squeue job records...], "mode": "ok" | "down" | "garbage", "cluster": ClusterName,
        "vanish": [ids that are gone by the time scontrol runs]}; calls go to <state>.calls.jsonl.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

TOOLS = ("squeue", "sinfo", "scontrol", "sdiag", "sacctmgr", "sprio")


def job(job_id: int, *, limit_min: int, cpus: int = 1, submit: int = 1_800_000_000, partition: str = "debug",
        state: str = "PENDING", reason: str = "Priority", **extra) -> dict:
    """A 22.05 `squeue --json` job record."""
    rec = {"job_id": job_id, "array_job_id": 0, "array_task_id": None, "array_task_string": "", "partition": partition,
           "job_state": state, "state_reason": reason, "priority": 11000, "submit_time": submit,
           "eligible_time": submit, "time_limit": limit_min, "cpus": cpus, "node_count": 1, "qos": "normal",
           "resv_name": "", "dependency": "", "user_name": "u"}
    rec.update(extra)
    return rec


def _main() -> None:
    tool = os.environ["STEER_STANDIN_TOOL"]
    state_path = Path(os.environ["STEER_STANDIN_STATE"])
    state = json.loads(state_path.read_text())
    stdin = sys.stdin.read() if tool == "scontrol" and len(sys.argv) == 1 else ""
    with open(str(state_path) + ".calls.jsonl", "a") as f:
        f.write(json.dumps({"tool": tool, "argv": sys.argv[1:], "lines": len(stdin.splitlines())}) + "\n")
    if state.get("mode") == "down":
        print(f"{tool}: error: slurm_load_jobs error: Unable to contact slurm controller (connect failure)", file=sys.stderr)
        sys.exit(1)
    meta = {"plugin": {"type": "openapi/v0.0.38"}, "Slurm": {"version": {"major": 22, "minor": 5, "micro": 8},
                                                             "release": "22.05.8"}}
    if tool == "squeue" and "-o" in sys.argv:  # `squeue -h -t PD -o %A|%P`
        for j in state["jobs"]:
            if j["job_state"] == "PENDING":
                print(f"{j['job_id']}|{j['partition']}")
    elif tool == "squeue":
        if state.get("mode") == "garbage":
            print("squeue: this is not JSON")
            return
        print(json.dumps({"meta": meta, "errors": [], "jobs": state["jobs"]}))
    elif tool == "sinfo":
        print(json.dumps({"meta": meta, "errors": [], "nodes": [
            {"name": "n1", "state": "mixed", "cpus": 64, "alloc_cpus": 32, "real_memory": 64000, "alloc_memory": 0,
             "partitions": ["debug"]}]}))
    elif tool == "sdiag":
        print("Remote Procedure Call statistics by message type\n\tREQUEST_UPDATE_JOB ( 3001) count:7 ave_time:1 total_time:7")
    elif tool == "sprio":  # `sprio -h -o %i|%S`: the pending jobs' site factors
        factors = state.get("site_factors", {})
        for j in state["jobs"]:
            if j["job_state"] == "PENDING":
                print(f"{j['job_id']}|{factors.get(str(j['job_id']), 0)}")
    elif tool == "sacctmgr":
        print("normal|")
    elif tool == "scontrol" and sys.argv[1:] == ["-o", "show", "partition"]:
        print("PartitionName=debug Nodes=n1 PriorityTier=1\nPartitionName=high Nodes=n1 PriorityTier=2")
    elif tool == "scontrol" and sys.argv[1:] == ["show", "config"]:
        if state.get("cluster"):
            print(f"ClusterName             = {state['cluster']}")
        print("PreemptType             = preempt/none\nPriorityWeightAge       = 1000\nPriorityWeightFairShare = 10000")
    elif tool == "scontrol":
        known = {str(j["job_id"]) for j in state["jobs"]} - set(map(str, state.get("vanish", [])))
        factors = state.setdefault("site_factors", {})
        bad = 0
        for line in stdin.splitlines():
            parts = line.split()
            if not parts or parts[0] != "update":
                continue
            ids = parts[1].split("=", 1)[1].split(",")
            value = int(parts[2].split("=", 1)[1])
            for jid in ids:
                if jid.split("_")[0] in known:
                    factors[jid] = value
                else:
                    print(f"Invalid job id specified for job {jid}", file=sys.stderr)
                    bad += 1
        state_path.write_text(json.dumps(state))
        sys.exit(1 if bad else 0)


def make_bin(folder: Path, state_path: Path) -> Path:
    """Executables named like Slurm's commands, each running this file with the state path set."""
    folder.mkdir(parents=True, exist_ok=True)
    for tool in TOOLS:
        exe = folder / tool
        exe.write_text(f"#!{sys.executable}\nimport os, runpy, sys\nos.environ['STEER_STANDIN_STATE'] = {str(state_path)!r}\n"
                       f"os.environ['STEER_STANDIN_TOOL'] = {tool!r}\nrunpy.run_path({str(Path(__file__).resolve())!r}, run_name='__main__')\n")
        exe.chmod(0o755)
    return folder


def mini_cluster(folder: Path, jobs: list[dict]) -> tuple[Path, Path, str]:
    """A stand-in cluster named `mini` holding `jobs`: (its state file, its commands' folder, a warehouse path)."""
    state = folder / "slurm-state.json"
    state.write_text(json.dumps({"jobs": jobs, "mode": "ok", "cluster": "mini"}))
    return state, make_bin(folder / "bin", state), str(folder / "w.duckdb")


def site_factors(state_path: Path) -> dict:
    """The site factors the stand-in holds, by job id."""
    return json.loads(state_path.read_text()).get("site_factors", {})


def update_state(state_path: Path, **kw) -> None:
    """Change the stand-in's state (its mode, jobs, factors) as a test scenario needs."""
    s = json.loads(state_path.read_text())
    s.update(kw)
    state_path.write_text(json.dumps(s))


def calls(state_path: Path) -> list[dict]:
    p = Path(str(state_path) + ".calls.jsonl")
    return [json.loads(ln) for ln in p.read_text().splitlines()] if p.exists() else []


if __name__ == "__main__":
    _main()


def band_factor(step: int, rank: int, n: int) -> int:
    """The site factor a fresh layout gives rank `rank` of `n` in a group (models/steering/rank.py:
    centred on the band's middle, GAP_STEPS steps apart)."""
    from metapilot.models.steering.rank import GAP_STEPS, band_for

    return int(round(band_for(step).mid + ((n - 1) / 2 - rank) * GAP_STEPS * step))
