"""The replay of what Slurm does (SPEC §6, §12; issue 51): nodes and partitions, Slurm's main and backfill
schedulers, multifactor priority, read from a site's slurm.conf."""

from metapilot.models.simulator.slurm.conf import (
    Node,
    Partition,
    PriorityParams,
    SchedulerParams,
    Shares,
    SlurmConf,
    conf_from_capacity,
    parse_shares,
    parse_slurm_conf,
    read_shares,
    read_slurm_conf,
    site_shares,
)
from metapilot.models.simulator.slurm.replay import (
    SlurmSchedule,
    conf_capacity,
    replay_slurm,
    simulate_slurm,
    slurm_schedule,
    workload_frame,
)

__all__ = ["Node", "Partition", "PriorityParams", "SchedulerParams", "Shares", "SlurmConf", "SlurmSchedule",
           "conf_capacity", "conf_from_capacity", "parse_shares", "parse_slurm_conf", "read_shares", "read_slurm_conf",
           "replay_slurm", "simulate_slurm", "site_shares", "slurm_schedule", "workload_frame"]
