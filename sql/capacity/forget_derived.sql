-- Drop the capacity a cluster's ($1) logs gave it (SWF headers, inferred peaks) once `forget` has
-- removed its last job; a configured capacity (source 'config') stays.
DELETE FROM capacity WHERE cluster = $1 AND source <> 'config'
  AND NOT EXISTS (SELECT 1 FROM jobs WHERE cluster = $1);
