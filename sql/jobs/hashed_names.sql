-- Whether jobs already hold pseudonymised names (32 hex digits: transforms/privacy.py keyed_hash):
-- raw names loaded beside them (--keep-names) would undo the pseudonymisation for those users.
SELECT EXISTS (SELECT 1 FROM jobs WHERE regexp_full_match(coalesce(user_id, account_id, group_id, ''), '[0-9a-f]{32}'));
