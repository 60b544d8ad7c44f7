-- Every capacity entry, as `metapilot capacity` shows them.
SELECT * FROM capacity ORDER BY cluster, partition, valid_from;
