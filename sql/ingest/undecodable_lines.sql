-- How many of a file's quarantined lines could not be decoded as text ($prefix: the reason's start,
-- warehouse/ingest.py UNDECODABLE_PREFIX): the case where --encoding fixes the load. $scope: the
-- load's cluster when the file's lines name no cluster, else NULL (any load of the file).
SELECT count(*) AS n FROM quarantine
WHERE file_sha256 = $sha256 AND starts_with(reason, $prefix) AND ($scope IS NULL OR cluster = $scope);
