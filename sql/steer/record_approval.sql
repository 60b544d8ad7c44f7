-- A person approves a decision for steering (metapilot approve): approved_by is the real uid's account,
-- claimed_by what $SUDO_USER said (never trusted alone).
INSERT INTO steer_approvals (cluster, decision, kind, policy_id, published_at, approved_by, approved_at, note,
                             claimed_by)
VALUES ($cluster, $decision, $kind, $policy_id, $published_at, $approved_by, $approved_at, $note, $claimed_by);
