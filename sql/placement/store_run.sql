-- One placement replay's result (warehouse/placement_store.py store_run): the headline figures as
-- columns, the whole result (curve, counts, settings) as JSON.
INSERT INTO placement_runs (run_id, cluster, policy, mode, seed, created_at, pods, placed, failed, mean_wait_s,
                            gpu_alloc_share, frag_gpu_share, imbalance, hot_node_share, idle_share, unfit,
                            unknown_gpu_model, seconds, result_json, code_version)
VALUES ($run_id, $cluster, $policy, $mode, $seed, $created_at, $pods, $placed, $failed, $mean_wait_s,
        $gpu_alloc_share, $frag_gpu_share, $imbalance, $hot_node_share, $idle_share, $unfit,
        $unknown_gpu_model, $seconds, $result_json, $code_version);
