"""Prefect flows: thin wiring of tasks over the warehouse, simulator and controller.

Importing this package sets quiet, offline Prefect defaults (no telemetry: the machines that run
MetaPilot often have no route out) unless the user has set them.
"""

import os

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("DO_NOT_TRACK", "1")
