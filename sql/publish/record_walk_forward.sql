-- The walk forward's decision for the next period (warehouse/publish_store.py publish_walk_forward):
-- a rule with its tail guard (kind 'fixed') or the planner (kind 'planner'), backed by `backtest_id`.
INSERT INTO published_policies (cluster, partition, policy_id, heldout_id, published_at, verdict, kind,
                                recommendation, message, guard_h, planner, backtest_id, record)
VALUES ($cluster, $partition, NULL, NULL, $published_at, $verdict, $kind, $recommendation, $message,
        $guard_h, $planner, $backtest_id, $record);
