"""The ground layer: what every other layer needs (paths, the SQL files, checksums, the code
version). It imports nothing else of the project."""
