-- Node placement (SPEC §11) of the cluster ($cluster): the latest replay of each policy in each
-- mode (`metapilot place replay`, `metapilot place train`), heuristics and PPO agents alike.
SELECT mode, policy, seed, created_at, pods, placed, failed, mean_wait_s, gpu_alloc_share, frag_gpu_share,
       imbalance, hot_node_share, idle_share
FROM placement_runs
WHERE cluster = $cluster
QUALIFY row_number() OVER (PARTITION BY policy, mode ORDER BY created_at DESC, run_id) = 1
ORDER BY mode DESC, CASE policy WHEN 'random' THEN 0 WHEN 'first-fit' THEN 1 WHEN 'best-fit' THEN 2
                                WHEN 'least-loaded' THEN 3 WHEN 'fgd' THEN 4 ELSE 5 END, policy;
