-- One steering cycle (models/steering/loop.py).
INSERT INTO steer_cycles (cycle_id, cluster, started_at, mode, decision, objective, guard_h, pending, eligible,
                          changed, failed, seconds, slurm_seconds, rpc_counts, status, message, guard_job)
VALUES ($cycle_id, $cluster, $started_at, $mode, $decision, $objective, $guard_h, $pending, $eligible,
        $changed, $failed, $seconds, $slurm_seconds, $rpc_counts, $status, $message, $guard_job);
