"""Not code: the bundled real logs (`logs/`, provenance in README.md), installed as the package
data of `metapilot.samples`: `metapilot pipeline` with no paths runs on them."""
