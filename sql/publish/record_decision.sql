-- One publish decision (warehouse/publish_store.py promote): the controller passed the gate
-- (kind 'controller') or a fixed rule is what to run (kind 'fixed'), with the gate's verdicts (JSON).
INSERT INTO published_policies (cluster, partition, policy_id, heldout_id, published_at, verdict, kind,
                                recommendation, message, gate, gate_training, ope_passes)
VALUES ($cluster, $partition, $policy_id, $heldout_id, $published_at, $verdict, $kind,
        $recommendation, $message, $gate, $gate_training, $ope_passes);
