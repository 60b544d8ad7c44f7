"""Jobs that ask for more than their cluster has, said when they arrive (issue 54): at ingest and
when a capacity config is loaded, not first as an empty replay. A replay leaves such jobs out."""

from __future__ import annotations

import duckdb

from metapilot.ground.paths import sql_text
from metapilot.ground.units import fmt_mib

OVERSIZE_ADVICE = ("give the real capacity in warehouse/clusters.toml (`metapilot capacity --config FILE`), or, when "
                   "an SWF log's memory is not in KB (Alea's extended SWF holds bytes), `metapilot forget` the file and "
                   "ingest it again with --mem-unit b")


def oversize_warnings(con: duckdb.DuckDBPyConnection, clusters: list[str]) -> list[str]:
    """One warning per cluster of `clusters` with jobs larger than its capacity: how many, which
    resource, the largest ask against the capacity, and what to do."""
    if not clusters:
        return []
    rows = con.execute(sql_text("ingest/oversize_jobs.sql"), [sorted(set(clusters))]).fetchall()
    out = []
    for (cluster, jobs, over, n_c, max_c, cap_c, n_g, max_g, cap_g, n_m, max_m, cap_m) in rows:
        what = [f"{n:,} {name}, up to {fmt(top)} against {fmt(cap)}" for n, name, top, cap, fmt in (
            (n_c, "for cores", max_c, cap_c, "{:,.0f}".format), (n_g, "for GPUs", max_g, cap_g, "{:,.0f}".format),
            (n_m, "for memory", max_m, cap_m, fmt_mib)) if n]
        share = f"all {jobs:,} of its jobs" if over == jobs else f"{over:,} of its {jobs:,} jobs"
        out.append(f"cluster {cluster}: {share} ask for more than the cluster has ({'; '.join(what)}): "
                   f"a replay leaves them out{', so it has nothing to replay' if over == jobs else ''}; {OVERSIZE_ADVICE}")
    return out
