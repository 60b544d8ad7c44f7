"""The offline-RL controller: objectives (actions), as-run tuples, dataset, training, artifact."""
