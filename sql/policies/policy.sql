-- One registered policy (controller or placement) by id.
SELECT * FROM policies WHERE policy_id = $policy_id;
