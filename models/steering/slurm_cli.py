"""The one place the steering loop talks to Slurm: subprocess calls of squeue, sinfo, scontrol and
sdiag, with timeouts. Everything it returns is text for `squeue.py` to parse, decoded with
U+FFFD for bytes that are not UTF-8 (a job name, comment or output path is the user's bytes: one
undecodable name must not stop steering; only numbers and fixed fields are used). Updates go in batches
through one `scontrol` process reading its commands on stdin (one RPC per line, not one process per
job), and jobs sharing a site factor share a line (`update job=1,2,3 SiteFactor=N`).

Least privilege: every call here is one an account with `AdminLevel=Operator` may make
(`sacctmgr add user metapilot AdminLevel=Operator`); nothing else is needed (sprio, which reads
the site factors back after a failed update, is open to every user).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass, field


class SlurmUnreachable(RuntimeError):
    """A Slurm command could not be run or failed: the message says which and what it said."""


def decode(data: bytes | None) -> str:
    """Slurm's answer as text: UTF-8, any other byte as U+FFFD (squeue --json passes a job's name and
    paths through as the user's raw bytes, which strict decoding refuses)."""
    return (data or b"").decode("utf-8", errors="replace")


@dataclass
class UpdateResult:
    lines: int
    failed: dict[str, str]  # job id -> Slurm's message
    seconds: float


@dataclass
class SlurmCli:
    """Slurm's commands, found on PATH (or in `bin_dir`), each call timed into `slurm_seconds`."""

    bin_dir: str | None = None
    timeout_s: float = 30.0
    lines_per_call: int = 5000
    slurm_seconds: float = field(default=0.0)
    calls: int = field(default=0)

    def _exe(self, name: str) -> str:
        if self.bin_dir:
            return os.path.join(self.bin_dir, name)
        found = shutil.which(name)
        if not found:
            raise SlurmUnreachable(f"{name} is not on PATH: run steer where Slurm's client commands are installed")
        return found

    def _run(self, args: list[str], stdin: str | None = None, ok_codes: tuple[int, ...] = (0,)) -> subprocess.CompletedProcess:
        t0 = time.perf_counter()
        try:
            raw = subprocess.run([self._exe(args[0]), *args[1:]], input=None if stdin is None else stdin.encode(),
                                 capture_output=True, timeout=self.timeout_s)
        except subprocess.TimeoutExpired:
            raise SlurmUnreachable(f"{args[0]} did not answer within {self.timeout_s:g} s") from None
        except OSError as e:
            raise SlurmUnreachable(f"{args[0]} could not be run: {e}") from None
        finally:
            self.slurm_seconds += time.perf_counter() - t0
            self.calls += 1
        res = subprocess.CompletedProcess(raw.args, raw.returncode, decode(raw.stdout), decode(raw.stderr))
        if res.returncode not in ok_codes:
            said = (res.stderr or res.stdout).strip().splitlines()
            raise SlurmUnreachable(f"{' '.join(args[:2])} failed (exit {res.returncode}): {said[0] if said else 'no message'}")
        return res

    def squeue_json(self) -> str:
        return self._run(["squeue", "--all", "--json"]).stdout

    def pending_partitions(self) -> str:
        """`squeue -h -t PD -o %A|%P`: each pending record's id and partition, a few bytes a job (the
        cheap check between cycles for jobs moved to another partition)."""
        return self._run(["squeue", "-h", "-t", "PD", "-o", "%A|%P"]).stdout

    def sinfo_json(self) -> str:
        return self._run(["sinfo", "--json"]).stdout

    def partitions(self) -> str:
        return self._run(["scontrol", "-o", "show", "partition"]).stdout

    def config(self) -> str:
        return self._run(["scontrol", "show", "config"]).stdout

    def site_factors(self) -> str:
        """`sprio -h -o %i|%S`: each pending job's site factor as slurmctld holds it (reading back
        what a failed batch of updates did)."""
        return self._run(["sprio", "-h", "-o", "%i|%S"]).stdout

    def sdiag(self) -> str:
        try:
            return self._run(["sdiag"]).stdout
        except SlurmUnreachable:
            return ""  # sdiag's counts are a record, not a need

    def preempting_qos(self, config: str | None = None) -> frozenset[str]:
        """QOS that may preempt others (empty unless PreemptType is preempt/qos); `config`: the
        `scontrol show config` text already read, if any."""
        if "preempt/qos" not in (self.config() if config is None else config):
            return frozenset()
        try:
            out = self._run(["sacctmgr", "-nP", "show", "qos", "format=name,preempt"]).stdout
        except SlurmUnreachable:
            return frozenset()
        return frozenset(ln.split("|")[0] for ln in out.splitlines() if "|" in ln and ln.split("|")[1].strip())

    def update_site_factors(self, batches: list[tuple[int, list[str]]]) -> UpdateResult:
        """Set site factors: one `update job=ID[,ID...] SiteFactor=N` line per batch, read by one
        scontrol process per `lines_per_call` lines. Jobs Slurm refused (gone since the read) are
        returned with its message; the others are set."""
        t0 = time.perf_counter()
        failed: dict[str, str] = {}
        lines = [f"update job={','.join(ids)} SiteFactor={value}" for value, ids in batches]
        for i in range(0, len(lines), self.lines_per_call):
            chunk = lines[i:i + self.lines_per_call]
            res = self._run(["scontrol"], stdin="\n".join(chunk) + "\nquit\n", ok_codes=(0, 1))
            for m in re.finditer(r"^(.*?)\s+for job\s+(\S+)\s*$", res.stderr, re.MULTILINE):
                for jid in m.group(2).split(","):
                    failed[jid] = m.group(1).strip()
            if res.returncode != 0 and not failed:
                said = res.stderr.strip().splitlines()
                raise SlurmUnreachable(f"scontrol update failed: {said[-1] if said else 'no message'}")
        return UpdateResult(len(lines), failed, time.perf_counter() - t0)
