"""Applying decisions to a real scheduler (SPEC §12): export as configuration, and the live steering
loop through Slurm's site factor. `slurm_cli.py` is the only module that runs Slurm's commands."""
