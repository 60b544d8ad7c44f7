"""Judging decisions: how a policy or a rule would have done, on weeks chosen for the purpose.

Above the simulator and the controller, below the flows and the report:

- `checkpoint`: the candidates' replay score on the checkpoint window (which checkpoint to keep);
- `heldout`: the held-out replay of a policy against every fixed rule, the planner, its oracle
  bound and the as-run history, with weekly paired intervals (what the publish gate reads);
- `roi`: the held-out replay priced in core-hours and researcher time.

The publish gate itself (`models.controller.gate`) stays with the controller, whose tuning ranks
the fixed rules by it. The weekly report reads these results and nothing below them.
"""
