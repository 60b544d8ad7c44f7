"""The steering loop's cycle (SPEC §12): read Slurm, choose the objective, rank, set the site factors
that must change, record. Pure work is in `squeue.py` and `rank.py`; Slurm is reached only through
`slurm_cli.SlurmCli` (or a stand-in with the same methods); the warehouse through `steer_store`.

Safety: a cycle that cannot read Slurm, or reads what it cannot parse, changes nothing and says so
in its row; a job gone between the read and the update is reported, the others are set. `release`
sets every job the loop set back to 0 (on --release, exit, SIGTERM, and at the next start after a
crash, since the jobs set stay in `steered_jobs` until released; a clean --once exit is recorded as
'kept' and the next start carries on from it). The live tail guard counts a job's wait from when it
became eligible; when one has waited past the limit, or utilisation while jobs wait falls below the
floor, it releases everything, logs why and which job (a 'guard' row) and pauses steering for
`guard_pause_s` (cycles in the pause are 'paused' rows), then steering goes on, the late job put
ahead of its group. A job trips it once, and there is at most one trip per pause: no user's job can
switch steering off. ('halted', from older versions, still waits for `steer --resume`.)

Against its users (issue 49): each live cycle reads the site factors back (`sprio`) and sets again
those Slurm no longer holds as the loop set them (cleared behind its back); a job whose partition
changed while it carried a factor is placed afresh in its new group, first, and named in the row;
one loop per cluster (`lock.py`): a live loop, --once and --release hold the warehouse's lock and
beat it each cycle; a loop whose lock was taken over stops and leaves the factors to the new holder.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import polars as pl

from metapilot.models.steering.decision import SteerDecision
from metapilot.models.steering.lock import SteerLock
from metapilot.models.steering.rank import (
    SITE_FACTOR_MAX,
    STEERABLE_REASONS,
    batches,
    changes,
    desired_factors,
    protect,
    targets,
)
from metapilot.models.steering.slurm_cli import SlurmUnreachable
from metapilot.models.steering.squeue import (
    SlurmParseError,
    parse_cluster_name,
    parse_config_weights,
    parse_partitions,
    parse_sdiag_rpcs,
    parse_sinfo,
    parse_site_factors,
    parse_squeue,
)
from metapilot.warehouse import steer_store as store


class ClusterMismatch(ValueError):
    """--cluster names another cluster than the Slurm the commands reach: nothing is changed."""


@dataclass
class SteerOptions:
    cluster: str
    dry_run: bool = False
    step: int | None = None  # None: one more than the largest PriorityWeight* (the rule decides the order)
    max_changes: int = 2000  # site factors sent per cycle at most: the bound on its update RPCs
    guard_h: float | None = None  # pause when a pending job has waited longer since it became eligible
    util_floor: float | None = None  # pause when cores in use / capacity falls below while jobs wait
    guard_pause_s: float = 3600.0  # how long a guard trip pauses steering (and at most one trip per pause)
    lock_stale_s: float = 300.0  # a lock holder silent this long is taken to be gone (see lock.py)


@dataclass
class CycleOutcome:
    row: dict
    set: pl.DataFrame = field(default_factory=pl.DataFrame)
    failed: dict[str, str] = field(default_factory=dict)

    @property
    def line(self) -> str:
        r = self.row
        head = f"{r['started_at']:%H:%M:%S} {r['mode']} {r['status']}"
        if r["status"] in ("ok",):
            head += (f": {r['objective']}, {r['pending']} pending, {r['eligible']} ranked, {r['changed']} "
                     f"{'would change' if r['mode'] == 'dry-run' else 'changed'}")
            if r["failed"]:
                head += f", {r['failed']} gone before the update"
            head += f" ({r['seconds']:.3f} s + Slurm {r['slurm_seconds']:.3f} s)"
        return head + (f": {r['message']}" if r.get("message") else "")


class Steerer:
    """One cluster's steering: `start` (release leftovers, read the partitions), then `cycle`s,
    then `release`. `connect` opens the warehouse for writing (one short transaction per cycle)."""

    def __init__(self, slurm, connect, decision: SteerDecision, opts: SteerOptions, advisor=None,
                 clock=time.time) -> None:
        self.slurm, self.connect, self.decision, self.opts = slurm, connect, decision, opts
        self.advisor, self.clock = advisor, clock
        self._probe = None  # a controller's lookahead probe (its state holds rollout features), kept across cycles
        self._unsure = set()
        if opts.step is not None and not 1 <= opts.step <= SITE_FACTOR_MAX:
            # 0 or below would invert the rule (or, as 0 did, silently become another step)
            raise ValueError(f"the site factor step must be 1 to {SITE_FACTOR_MAX}, not {opts.step}")
        self.tiers: dict[str, int] = {}
        self.preempting: frozenset[str] = frozenset()
        self.step = opts.step

    # --- setup -----------------------------------------------------------------------------

    lock: SteerLock | None = None
    lost_lock: bool = False

    def take_lock(self, mode: str, who: str) -> list[str]:
        """One loop per cluster: take the warehouse's steering lock (SteerLocked naming the holder)."""
        self.lock = SteerLock(self.connect, self.opts.cluster, mode, self.opts.lock_stale_s, clock=self.clock)
        return self.lock.take(who)

    def free_lock(self) -> None:
        if self.lock is not None and not self.lost_lock:
            self.lock.free()

    def halted(self) -> dict | None:
        con = self.connect()
        try:
            h = store.last_halt(con, self.opts.cluster)
        finally:
            con.close()
        return h if h and h["status"] == "halted" else None

    def resume(self, who: str) -> None:
        self._record(self._row("release", "resumed", message=f"steering resumed by {who}"))

    def check_cluster(self) -> list[str]:
        """Refuse to steer (or release) a Slurm whose ClusterName is not --cluster: the warehouse's rows,
        decision and job ids are that cluster's, and job ids mean other jobs on another cluster."""
        config = self._config = self.slurm.config()
        name = parse_cluster_name(config)
        if name is None:
            return [f"scontrol show config names no ClusterName: --cluster {self.opts.cluster} is not checked"]
        if name.casefold() != self.opts.cluster.casefold():
            raise ClusterMismatch(f"--cluster {self.opts.cluster}, but the Slurm these commands reach (SLURM_CONF) is "
                                  f"cluster {name}: nothing changed; name --cluster {name}, or point SLURM_CONF at "
                                  f"{self.opts.cluster}'s slurm.conf")
        return []

    _config: str | None = None

    def start(self) -> list[str]:
        """Check the cluster, read the partitions' tiers and the step; release what a crashed run left set."""
        said = self.check_cluster()
        self.tiers = parse_partitions(self.slurm.partitions())
        if self.step is None:
            weights = parse_config_weights(self._config or "")
            self.step = min(max(weights.values(), default=1000) + 1, SITE_FACTOR_MAX)
            said.append(f"site factor step {self.step} (one more than the largest PriorityWeight: the rule decides "
                        "the order; a smaller --step blends it with age, fair-share and QOS)")
        self.preempting = self.slurm.preempting_qos(self._config)
        _warm_up()
        con = self.connect()
        try:
            left = store.current_steered(con, self.opts.cluster)
            last = store.last_exit(con, self.opts.cluster)
        finally:
            con.close()
        if not self.opts.dry_run:
            said += self._foreign_factors(left)
        if not left.is_empty():
            if self.opts.dry_run:
                said.append(f"{left.height} jobs still carry a site factor from an earlier run; a dry run leaves them "
                            "(run `metapilot steer --release`)")
            elif last is not None and last["status"] == "kept":
                # a clean --once exit: carry on from its factors (only what moved is sent), and say so in a
                # row, so that a crash of this run is not taken for another clean exit
                self._record(self._row("live", "adopted", message=f"{left.height} jobs keep the site factors "
                                                                  f"set by --once at {last['at']:%Y-%m-%d %H:%M:%S} UTC"))
                said.append(f"{left.height} jobs keep the site factors an earlier --once set "
                            f"({last['at']:%Y-%m-%d %H:%M:%S} UTC); only those that must change are sent")
            else:
                out = self.release("the previous run ended without releasing (a crash or SIGKILL)")
                said.append(out.line)
        return said

    def _foreign_factors(self, left: pl.DataFrame) -> list[str]:
        """What Slurm shows of another steerer: pending jobs carrying site factors this warehouse never
        set (a loop steering the cluster from another warehouse, whose lock this one cannot see, or an
        admin by hand): said at the start, since two loops fight over the same factors."""
        try:
            actual = parse_site_factors(self.slurm.site_factors())
        except (SlurmUnreachable, SlurmParseError):
            return []
        mine = set(left["job_id"].to_list()) if not left.is_empty() else set()
        foreign = sorted(j for j, v in actual.items() if v != 0 and j not in mine)
        if not foreign:
            return []
        return [f"warning: {len(foreign)} pending jobs carry site factors this warehouse never set "
                f"({', '.join(foreign[:5])}{', ...' if len(foreign) > 5 else ''}): another loop steering "
                f"{self.opts.cluster} from another warehouse, or an admin by hand? One loop per cluster: two fight "
                "over the same factors"]

    def keep(self) -> CycleOutcome:
        """A clean --once exit: the factors stay set, recorded as kept so that the next start carries on
        from them instead of releasing them as a crash's."""
        con = self.connect()
        try:
            n = store.current_steered(con, self.opts.cluster).height
        finally:
            con.close()
        row = self._row("live", "kept", message=f"--once: {n} jobs keep their site factors; the next start carries on "
                                                "from them (`metapilot steer --release` clears them)")
        self._record(row)
        return CycleOutcome(row)

    # --- one cycle ---------------------------------------------------------------------------

    def _row(self, mode: str, status: str, **kw) -> dict:
        row = {"cycle_id": uuid.uuid4().hex[:16], "cluster": self.opts.cluster,
               "started_at": datetime.fromtimestamp(self.clock(), timezone.utc), "mode": mode,
               "decision": self.decision.label, "objective": None, "guard_h": self.opts.guard_h, "pending": None,
               "eligible": None, "changed": 0, "failed": 0, "seconds": 0.0, "slurm_seconds": 0.0, "rpc_counts": None,
               "status": status, "message": None, "guard_job": None}
        row.update(kw)
        return row

    def _record(self, row: dict, set_rows: pl.DataFrame | None = None, forget: list[str] | None = None,
                shadow: pl.DataFrame | None = None, con=None) -> None:
        """The cycle's row and what it changed, in one transaction. `set_rows`: the jobs it set, whose
        non-zero factors were written ahead (`_write_ahead`); zeros release the jobs."""
        own = con is None
        con = self.connect() if own else con
        try:
            con.execute("BEGIN")
            store.record_cycle(con, row)
            at = row["started_at"]
            if set_rows is not None and not set_rows.is_empty():
                zero = set_rows.filter(pl.col("site_factor") == 0)["job_id"].to_list()
                store.mark_released(con, self.opts.cluster, zero, at)
                store.confirm_steered(con, self.opts.cluster, row["cycle_id"],
                                      set_rows.filter(pl.col("site_factor") != 0)["job_id"].to_list(), at)
            if forget:
                store.mark_released(con, self.opts.cluster, forget, at)
            if shadow is not None:
                store.record_shadow(con, shadow)
            con.execute("COMMIT")
        except Exception:
            con.execute("ROLLBACK")
            raise
        finally:
            if own:
                con.close()

    def objective(self, jobs: pl.DataFrame, nodes: pl.DataFrame, now: float) -> str:
        waits = self.waits(jobs, now)["wait"]
        oldest = float(waits.max() or 0.0) if waits.len() else 0.0
        if self.decision.kind == "fixed":
            return self.decision.objective(oldest)
        if self.decision.kind == "planner":
            return self.decision.planner_objective(jobs, nodes, now, oldest)
        from metapilot.models.steering.live_state import live_state

        config = self.advisor.policy.state_config
        if config.lookahead_h > 0 and self._probe is None:
            from metapilot.models.controller.lookahead import LookaheadProbe

            self._probe = LookaheadProbe(config)
        return self.advisor.decide(live_state(jobs, nodes, now, config, self._probe, self.decision.origin_s)).objective

    def waits(self, jobs: pl.DataFrame, now: float) -> pl.DataFrame:
        """The steerable pending jobs with how long each has waited since it became *eligible*
        (squeue's eligible_time: a held, --begin or dependent job's clock starts when it is released,
        not at submission; submit time only where Slurm gives none)."""
        waiting = jobs.filter((pl.col("state") == "PENDING") & pl.col("reason").is_in(list(STEERABLE_REASONS)))
        since = pl.when(pl.col("eligible_s") > 0).then(pl.col("eligible_s")).otherwise(pl.col("submit_s"))
        return waiting.with_columns((pl.lit(now) - since).alias("wait")).sort("wait", descending=True, nulls_last=True)

    def guard(self, jobs: pl.DataFrame, nodes: pl.DataFrame, now: float,
              tripped: frozenset[str] = frozenset()) -> tuple[str, str | None] | None:
        """(why, the job) when the live tail guard trips now, or None. A job that tripped it once
        (`tripped`) does not trip it again: it is put ahead of its group instead (`_protect`)."""
        w = self.waits(jobs, now)
        if w.is_empty():
            return None
        if self.opts.guard_h is not None:
            late = w.filter((pl.col("wait") > self.opts.guard_h * 3600) & ~pl.col("job_id").is_in(list(tripped)))
            if not late.is_empty():
                wait = late["wait"][0]
                said = f"{wait / 3600:.1f} h" if wait >= 360 else f"{wait:.0f} s"
                return (f"job {late['job_id'][0]} has waited {said} since it became eligible, past the limit of "
                        f"{self.opts.guard_h:g} h", late["job_id"][0])
        if self.opts.util_floor is not None and not nodes.is_empty():
            cap = float(nodes["cpus"].sum())
            used = float(nodes["alloc_cpus"].sum())
            if cap > 0 and used / cap < self.opts.util_floor:
                return (f"{used / cap:.0%} of the cores are in use while {w.height} jobs wait, below the floor "
                        f"of {self.opts.util_floor:.0%}", None)
        return None

    def _trips(self, now: float) -> list[tuple[datetime, str | None]]:
        """The guard's trips within the last 30 days (the jobs that tripped it, the last pause)."""
        con = self.connect()
        try:
            return store.guard_trips(con, self.opts.cluster, "dry-run" if self.opts.dry_run else "live",
                                     datetime.fromtimestamp(now - 30 * 86400, timezone.utc))
        finally:
            con.close()

    def objective_seconds(self) -> float:
        """How long working out this cycle's objective takes on the live queue now (for the planner, its
        lookahead from the live view): what an `--every` must leave room for."""
        jobs = parse_squeue(self.slurm.squeue_json())[1]
        nodes = parse_sinfo(self.slurm.sinfo_json())
        t0 = time.perf_counter()
        self.objective(jobs, nodes, self.clock())
        return time.perf_counter() - t0

    def cycle(self) -> CycleOutcome:
        t0 = time.perf_counter()
        self.slurm.slurm_seconds = 0.0
        mode = "dry-run" if self.opts.dry_run else "live"
        now = self.clock()
        if self.lock is not None and not self.lock.beat():
            self.lost_lock = True
            row = self._row(mode, "error", message="another loop took the steering lock over (this one was taken for "
                                                   "gone): this loop stops and leaves the factors to it")
            self._record(row)
            return CycleOutcome(row)
        try:
            version, jobs = parse_squeue(self.slurm.squeue_json())
            nodes = parse_sinfo(self.slurm.sinfo_json())
        except (SlurmUnreachable, SlurmParseError) as e:
            row = self._row(mode, "error", message=f"nothing changed: {e}",
                            seconds=time.perf_counter() - t0 - self.slurm.slurm_seconds,
                            slurm_seconds=self.slurm.slurm_seconds)
            self._record(row)
            return CycleOutcome(row)
        pending = int((jobs["state"] == "PENDING").sum())
        trips = self._trips(now)
        if trips:
            until = trips[-1][0].timestamp() + self.opts.guard_pause_s
            if now < until:  # one trip per pause: a stream of late jobs cannot keep steering off
                row = self._row(mode, "paused", pending=pending,
                                message=f"the live tail guard paused steering until "
                                        f"{datetime.fromtimestamp(until, timezone.utc):%H:%M:%S} UTC: nothing set")
                self._record(row)
                return CycleOutcome(row)
        tripped = frozenset(j for _, j in trips if j)
        fired = self.guard(jobs, nodes, now, tripped)
        if fired is not None:
            why, job = fired
            if not self.opts.dry_run:
                self.release(f"live tail guard: {why}")
            pause = self.opts.guard_pause_s
            row = self._row(mode, "guard", pending=pending, guard_job=job,
                            message=f"{why}: every steered job released, Slurm's own order for "
                                    f"{pause / 60:g} min; then steering goes on"
                                    + (f", with job {job} ahead of its group" if job else ""))
            self._record(row)
            return CycleOutcome(row)
        objective = self.objective(jobs, nodes, now)
        ranked = targets(jobs, self.preempting)
        con = self.connect()
        try:
            current = store.current_steered(con, self.opts.cluster)
            current_frame = (current.select("job_id", "site_factor", "group_key") if not current.is_empty() else
                             pl.DataFrame(schema={"job_id": pl.Utf8, "site_factor": pl.Int64, "group_key": pl.Utf8}))
            notes: list[str] = []
            if self.opts.dry_run:
                # a shadow run compares with what it would have set in its own previous cycle
                current_frame = self._shadow_current(current_frame)
            else:
                current_frame, note = self._read_back(current_frame)
                notes += [note] if note else []
            # factors read back as other than set (cleared behind the loop's back) are placed afresh
            keepable = current_frame.filter(~pl.col("job_id").is_in(list(self._drifted | self._unsure)))
            desired = desired_factors(ranked, objective, now, int(self.step), self.tiers, keepable,
                                      self.decision.origin_s)
            if tripped and self.opts.guard_h is not None:
                late = self.waits(jobs, now).filter(pl.col("wait") > self.opts.guard_h * 3600)["job_id"].to_list()
                desired = protect(desired, ranked, set(late) & tripped, int(self.step))
            moved = desired.filter(pl.col("moved_from").is_not_null()) if "moved_from" in desired.columns else desired.clear()
            if not moved.is_empty():
                shown = ", ".join(f"{r['target']}: {r['moved_from']} -> {r['group_key']}"
                                  for r in moved.head(5).iter_rows(named=True))
                notes.append(f"{moved.height} jobs moved to another partition while carrying a site factor ({shown}"
                             f"{', ...' if moved.height > 5 else ''}): placed in their new group first")
            return self._apply(con, jobs, ranked, desired, current_frame, objective, version, now, t0, mode, notes)
        finally:
            con.close()

    _drifted: set[str] = frozenset()  # type: ignore[assignment]

    def _read_back(self, current: pl.DataFrame) -> tuple[pl.DataFrame, str | None]:
        """What Slurm holds (`sprio`'s site factors), compared with what the loop set: a factor cleared or
        changed behind its back (slurmctld restarted from an older state, another admin) is taken as
        Slurm has it, so that it is sent again; one job a line in a single read, nothing sent where they
        agree. Jobs sprio does not list (started, gone) are left to the ranking."""
        self._drifted = set()
        if current.is_empty():
            return current, None
        try:
            actual = parse_site_factors(self.slurm.site_factors())
        except (SlurmUnreachable, SlurmParseError) as e:
            return current, f"site factors not read back ({e})"
        mine = dict(zip(current["job_id"].to_list(), current["site_factor"].to_list()))
        drift = {j: actual[j] for j, v in mine.items() if j in actual and actual[j] != v and j not in self._unsure}
        if not drift:
            return current, None
        self._drifted = set(drift)
        current = current.with_columns(
            pl.col("job_id").replace_strict(drift, default=pl.col("site_factor"), return_dtype=pl.Int64).alias("site_factor"))
        shown = ", ".join(f"{j} {mine[j]} -> {v}" for j, v in list(drift.items())[:5])
        return current, (f"{len(drift)} site factors not as the loop set them ({shown}{', ...' if len(drift) > 5 else ''}: "
                         "cleared or changed behind its back): set again")

    def _apply(self, con, jobs, ranked, desired, current_frame, objective, version, now, t0, mode,
               notes: list[str] | None = None) -> CycleOutcome:
        pending_ids = set(ranked.filter(pl.col("state") == "PENDING")["job_id"].to_list()) | set(
            ranked.filter(pl.col("array_job_id").is_not_null() & (pl.col("state") == "PENDING"))["array_job_id"].to_list())
        current_frame = current_frame.select("job_id", "site_factor")
        if not self.opts.dry_run and self._unsure:
            # factors a failed update may or may not have set: -1 (never a factor) differs from any value,
            # so they are sent again
            current_frame = current_frame.with_columns(
                pl.when(pl.col("job_id").is_in(list(self._unsure))).then(pl.lit(-1, dtype=pl.Int64))
                .otherwise(pl.col("site_factor")).alias("site_factor"))
        todo, forget = changes(desired, current_frame, pending_ids, self.opts.max_changes)
        at = datetime.fromtimestamp(now, timezone.utc)
        failed: dict[str, str] = {}
        base = dict(objective=objective, pending=int((jobs["state"] == "PENDING").sum()), eligible=desired.height,
                    message="; ".join([f"Slurm {version}", *(notes or [])]))
        if self.opts.dry_run:
            self._last_shadow = desired
            shadow = desired.select(pl.lit("").alias("cycle_id"), pl.lit(self.opts.cluster).alias("cluster"),
                                    pl.lit(at).alias("shadow_at"), pl.col("target").alias("job_id"), "group_key", "rank",
                                    "site_factor", pl.lit(objective).alias("objective"))
            row = self._row(mode, "ok", changed=todo.height, **base)
            shadow = shadow.with_columns(pl.lit(row["cycle_id"]).alias("cycle_id"))
            row.update(seconds=time.perf_counter() - t0 - self.slurm.slurm_seconds, slurm_seconds=self.slurm.slurm_seconds)
            self._record(row, shadow=shadow, con=con)
            return CycleOutcome(row, todo)
        cycle_id = uuid.uuid4().hex[:16]
        ranked_now = desired.filter(pl.col("rank").is_not_null() & ~pl.col("target").str.contains("_", literal=True))
        self._partitions = dict(zip(ranked_now["target"].to_list(),
                                    ranked_now["group_key"].str.split("|").list.first().to_list()))
        if not todo.is_empty():
            self._write_ahead(con, todo, objective, cycle_id, at)
            try:
                res = self.slurm.update_site_factors(batches(todo))
                failed = res.failed
            except SlurmUnreachable as e:
                return self._reconcile(con, todo, objective, cycle_id, at, e, base, t0, mode)
        self._unsure -= set(todo["target"].to_list()) | set(forget)
        done = todo.filter(~pl.col("target").is_in(list(failed)))
        set_rows = done.select(pl.lit(self.opts.cluster).alias("cluster"), pl.col("target").alias("job_id"),
                               "site_factor", "rank", "group_key", pl.lit(objective).alias("objective"),
                               pl.lit("").alias("cycle_id"), pl.lit(at).alias("set_at"))
        rpcs = parse_sdiag_rpcs(self.slurm.sdiag())
        msg = base.pop("message")
        if failed:
            msg += f"; {len(failed)} gone before the update ({next(iter(failed.values()))}): left alone"
        row = self._row(mode, "ok", changed=done.height, failed=len(failed), rpc_counts=rpcs or None, message=msg,
                        cycle_id=cycle_id, **base)
        set_rows = set_rows.with_columns(pl.lit(cycle_id).alias("cycle_id"))
        row.update(seconds=time.perf_counter() - t0 - self.slurm.slurm_seconds, slurm_seconds=self.slurm.slurm_seconds)
        self._record(row, set_rows, forget + list(failed), con=con)
        return CycleOutcome(row, done, failed)

    _partitions: dict[str, str] = {}  # noqa: RUF012 - replaced per instance by each live cycle

    def moved_jobs(self) -> list[str]:
        """Ranked jobs whose partition changed since the last cycle, from one cheap `squeue -o %A|%P`
        read between cycles: the loop then cycles at once instead of leaving the job its factor from
        the other group until the next one (split array tasks are left to the cycle)."""
        if not self._partitions:
            return []
        try:
            text = self.slurm.pending_partitions()
        except SlurmUnreachable:
            return []
        now = dict(line.strip().partition("|")[::2] for line in text.splitlines() if "|" in line)
        return [j for j, part in self._partitions.items() if j in now and now[j] != part]

    def _write_ahead(self, con, todo: pl.DataFrame, objective: str, cycle_id: str, at: datetime) -> None:
        """Record the non-zero factors about to be set, committed before `scontrol` runs (see
        `steer_store.write_ahead`)."""
        rows = todo.filter(pl.col("site_factor") != 0).select(
            pl.lit(self.opts.cluster).alias("cluster"), pl.col("target").alias("job_id"), "site_factor", "rank",
            "group_key", pl.lit(objective).alias("objective"), pl.lit(cycle_id).alias("cycle_id"),
            pl.lit(at).alias("set_at"))
        con.execute("BEGIN")
        try:
            store.write_ahead(con, rows)
            con.execute("COMMIT")
        except Exception:
            con.execute("ROLLBACK")
            raise

    _unsure: set[str]

    def _reconcile(self, con, todo: pl.DataFrame, objective: str, cycle_id: str, at: datetime, err: Exception,
                   base: dict, t0: float, mode: str) -> CycleOutcome:
        """An update that failed, perhaps part-way (one scontrol process per 5,000 lines, the first may
        have gone through): read the factors back from Slurm. A job carrying what was sent is recorded
        as set; one carrying something else keeps its earlier row (the written-ahead one is dropped);
        one that cannot be read back stays recorded as set (so an exit or the next start releases it)
        and is sent again next cycle. Never: lines applied while their rows are deleted."""
        try:
            actual = parse_site_factors(self.slurm.site_factors())
        except (SlurmUnreachable, SlurmParseError):
            actual = {}
        sent = dict(zip(todo["target"].to_list(), todo["site_factor"].to_list()))
        took = [j for j, v in sent.items() if j in actual and actual[j] == v]
        missed = [j for j, v in sent.items() if j in actual and actual[j] != v]
        unknown = [j for j in sent if j not in actual]
        self._unsure |= set(unknown) | set(missed)
        set_rows = todo.filter(pl.col("target").is_in(took)).select(
            pl.lit(self.opts.cluster).alias("cluster"), pl.col("target").alias("job_id"), "site_factor", "rank",
            "group_key", pl.lit(objective).alias("objective"), pl.lit(cycle_id).alias("cycle_id"),
            pl.lit(at).alias("set_at"))
        row = self._row(mode, "error", cycle_id=cycle_id, changed=len(took), failed=len(missed) + len(unknown),
                        message=f"the update failed: {err}; read back from Slurm: {len(took)} of {len(sent)} set, "
                                f"{len(missed)} not set, {len(unknown)} unknown (recorded as set, so released at "
                                "exit, and sent again next cycle)",
                        **{k: v for k, v in base.items() if k != "message"})
        row.update(seconds=time.perf_counter() - t0 - self.slurm.slurm_seconds, slurm_seconds=self.slurm.slurm_seconds)
        con.execute("BEGIN")
        try:
            store.drop_written_ahead_jobs(con, self.opts.cluster, cycle_id, missed)
            con.execute("COMMIT")
        except Exception:
            con.execute("ROLLBACK")
            raise
        self._record(row, set_rows, con=con)
        return CycleOutcome(row, set_rows)

    _last_shadow: pl.DataFrame | None = None

    def _shadow_current(self, live_current: pl.DataFrame) -> pl.DataFrame:
        if self._last_shadow is None:
            return live_current.clear()
        return self._last_shadow.select(pl.col("target").alias("job_id"), "site_factor", "group_key")

    # --- release -----------------------------------------------------------------------------

    def release(self, reason: str) -> CycleOutcome:
        """Every job the loop set, back to site factor 0 (one scontrol line per 100 jobs)."""
        t0 = time.perf_counter()
        self.slurm.slurm_seconds = 0.0
        con = self.connect()
        try:
            left = store.current_steered(con, self.opts.cluster)
        finally:
            con.close()
        ids = left["job_id"].to_list() if not left.is_empty() else []
        failed: dict[str, str] = {}
        try:
            if ids:
                failed = self.slurm.update_site_factors([(0, ids[i:i + 100]) for i in range(0, len(ids), 100)]).failed
        except SlurmUnreachable as e:
            row = self._row("release", "error", message=f"release failed ({reason}): {e}; the jobs stay recorded and "
                                                        "the next start releases them")
            self._record(row)
            return CycleOutcome(row)
        self._unsure.clear()  # every job the loop set is at 0 now (or gone)
        row = self._row("release", "released", changed=len(ids) - len(failed), failed=len(failed),
                        seconds=time.perf_counter() - t0 - self.slurm.slurm_seconds,
                        slurm_seconds=self.slurm.slurm_seconds,
                        message=f"{reason}: {len(ids) - len(failed)} jobs back to site factor 0"
                                + (f", {len(failed)} already gone" if failed else ""))
        self._record(row, forget=ids)
        return CycleOutcome(row)


def _warm_up() -> None:
    """Compile the ranking's numba kernel before the first cycle, not inside it (about a second)."""
    import numpy as np

    from metapilot.models.simulator.objectives import queue_order

    queue_order("FCFS", submit_s=np.zeros(2), req_time_s=np.ones(2), cores=np.ones(2), job_seq=np.arange(2.0), now_s=1.0)


def warehouse_connector(db: str | Path | None):
    """A function opening the warehouse for one cycle (see `steer_store.steering_connector`)."""
    return store.steering_connector(db)
