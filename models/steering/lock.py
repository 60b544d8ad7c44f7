"""One steering loop per Slurm cluster (issue 49): two loops (say one on SJF, one on LAF) flipped the
same site factors every cycle, each start releasing the other's as a crash's. The lock is a row in the
warehouse (`steer_lock`), so it is seen from every host that steers through that warehouse and survives
the host that took it: a live loop, --once and --release take it, a second one is refused naming the
holder, and a holder that stopped beating (or whose process is gone, on this host) is taken over and
said so. Dry runs change nothing and take no lock."""

from __future__ import annotations

import os
import socket
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Callable

from metapilot.warehouse import steer_store as store


class SteerLocked(ValueError):
    """Another loop holds the cluster's steering lock: nothing was changed."""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another account's process: alive
    return True


def stale_reason(holder: dict, now: datetime, stale_s: float, host: str) -> str | None:
    """Why a lock holder is taken to be gone (its heartbeat silent for `stale_s`, or its process gone
    on this very host), or None while it holds."""
    silent = (now - holder["beat_at"]).total_seconds()
    if holder["host"] == host and not _alive(int(holder["pid"])):
        return f"its process {holder['pid']} on {host} is gone"
    if silent > stale_s:
        return f"no heartbeat for {silent:.0f} s (more than {stale_s:.0f} s)"
    return None


def describe_holder(h: dict, now: datetime) -> str:
    return (f"{h['holder']}@{h['host']} (pid {h['pid']}, {h['mode']}) since {h['taken_at']:%Y-%m-%d %H:%M:%S} UTC, "
            f"last heartbeat {max(0.0, (now - h['beat_at']).total_seconds()):.0f} s ago")


@dataclass
class SteerLock:
    """The cluster's lock for one process: `take` (or SteerLocked), `beat` each cycle, `free` at exit."""

    connect: Callable
    cluster: str
    mode: str
    stale_s: float = 300.0
    clock: Callable[[], float] = field(default=None)  # type: ignore[assignment]
    token: str = field(default_factory=lambda: uuid.uuid4().hex)
    held: bool = False

    def _now(self) -> datetime:
        import time

        return datetime.fromtimestamp((self.clock or time.time)(), timezone.utc)

    def take(self, who: str) -> list[str]:
        """Take the lock; a live holder is refused (SteerLocked, naming it), a stale one taken over."""
        host, now = socket.gethostname(), self._now()
        con = self.connect()
        said = []
        try:
            con.execute("BEGIN")
            try:
                h = store.lock_holder(con, self.cluster)
                if h is not None and h["token"] != self.token:
                    why = stale_reason(h, now, self.stale_s, host)
                    if why is None:
                        raise SteerLocked(
                            f"steering on {self.cluster} is held by {describe_holder(h, now)}: one loop per cluster "
                            "(two fight over the same site factors); nothing changed. Stop that one (SIGTERM releases "
                            f"its factors), or wait: a holder silent for {self.stale_s:.0f} s is taken over")
                    said.append(f"took over the steering lock of {describe_holder(h, now)}: {why}")
                store.take_lock(con, self.cluster, token=self.token, holder=who, host=host, pid=os.getpid(),
                                mode=self.mode, at=now)
                con.execute("COMMIT")
            except Exception:
                con.execute("ROLLBACK")
                raise
        finally:
            con.close()
        self.held = True
        return said

    def beat(self) -> bool:
        """The heartbeat; False when another loop took the lock over (this one was taken for stale)."""
        if not self.held:
            return True
        con = self.connect()
        try:
            ok = store.beat_lock(con, self.cluster, self.token, self._now())
        finally:
            con.close()
        self.held = ok
        return ok

    def free(self) -> None:
        if not self.held:
            return
        con = self.connect()
        try:
            store.free_lock(con, self.cluster, self.token)
        finally:
            con.close()
        self.held = False
