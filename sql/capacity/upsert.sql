-- One dated capacity entry (SPEC §5) of a cluster's partition ('*' = the whole cluster), replacing
-- the entry of the same cluster, partition and date.
INSERT OR REPLACE INTO capacity (cluster, partition, valid_from, nodes, cores, gpus, mem_mib, source, note)
VALUES ($cluster, $partition, $valid_from, $nodes, $cores, $gpus, $mem_mib, $source, $note);
