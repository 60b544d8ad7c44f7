-- A person approves a decision for steering (metapilot approve).
INSERT INTO steer_approvals (cluster, decision, kind, policy_id, published_at, approved_by, approved_at, note)
VALUES ($cluster, $decision, $kind, $policy_id, $published_at, $approved_by, $approved_at, $note);
