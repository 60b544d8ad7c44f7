-- The partitions a cluster's ($1) jobs ran in (NULL: jobs whose log names none), for an error
-- about an unknown --partition.
SELECT DISTINCT partition FROM jobs WHERE cluster = $1 ORDER BY partition NULLS LAST;
