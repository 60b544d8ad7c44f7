"""The replay of what Slurm does (SPEC §6, §12; issue 51): nodes and partitions, Slurm's main and backfill
schedulers, multifactor priority, read from a site's slurm.conf."""

from metapilot.models.simulator.slurm.conf import (
    Node,
    Partition,
    PriorityParams,
    SchedulerParams,
    SlurmConf,
    parse_slurm_conf,
    read_slurm_conf,
)
from metapilot.models.simulator.slurm.replay import SlurmSchedule, replay_slurm, slurm_schedule

__all__ = ["Node", "Partition", "PriorityParams", "SchedulerParams", "SlurmConf", "SlurmSchedule", "parse_slurm_conf",
           "read_slurm_conf", "replay_slurm", "slurm_schedule"]
