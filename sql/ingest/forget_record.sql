-- Before a load's record is written: drop earlier records of the same file and identity ($sha256,
-- and $scope: the cluster of the load when the file's lines name no cluster, else NULL = any).
DELETE FROM ingest_files WHERE sha256 = $sha256 AND ($scope IS NULL OR cluster = $scope);
