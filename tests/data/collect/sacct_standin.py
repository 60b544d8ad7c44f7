"""A stand-in for Slurm's `sacct`, for the `metapilot collect` tests (no Slurm needed).

It answers the command Open XDMoD's helper runs (`--allusers --parsable2 --noheader --allocations
--duplicates --clusters C --format <26 fields> --starttime S --endtime E`) from a file of real
sacct lines in those 26 fields ($SACCT_STANDIN_DATA, gzip or not), as sacct would at time E:
the jobs submitted by E that were not over before S; a job not started by E is printed PENDING, one
still running at E RUNNING (End `Unknown`). Each call's arguments are appended as a JSON line to
$SACCT_STANDIN_LOG. $SACCT_STANDIN_FAIL=1 makes it fail as sacct does when slurmdbd is down.
Times are read and printed in UTC, and it refuses to run unless TZ=UTC (what collect sets).
"""

import gzip
import json
import os
import sys
from datetime import datetime, timezone

FIELDS = ("jobid,jobidraw,cluster,partition,qos,account,group,gid,user,uid,submit,eligible,start,end,elapsed,"
          "exitcode,state,nnodes,ncpus,reqcpus,reqmem,reqtres,alloctres,timelimit,nodelist,jobname")
FLAGS = ("--allusers", "--parsable2", "--noheader", "--allocations", "--duplicates")


def ts(text):
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=timezone.utc)


def elapsed(seconds):
    d, rem = divmod(int(seconds), 86400)
    h, rem = divmod(rem, 3600)
    m, s = divmod(rem, 60)
    return (f"{d}-" if d else "") + f"{h:02d}:{m:02d}:{s:02d}"


def main(argv):
    log = os.environ.get("SACCT_STANDIN_LOG")
    if log:
        with open(log, "a") as f:
            f.write(json.dumps({"argv": argv, "tz": os.environ.get("TZ")}) + "\n")
    if os.environ.get("SACCT_STANDIN_FAIL") == "1":
        sys.stderr.write("sacct: error: Problem talking to the database: Connection refused\n")
        return 1
    if os.environ.get("TZ") != "UTC":
        sys.stderr.write("sacct stand-in: TZ is not UTC\n")
        return 2
    opts = {}
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in FLAGS:
            opts[a] = True
            i += 1
        elif a in ("--clusters", "--format", "--starttime", "--endtime"):
            opts[a] = argv[i + 1]
            i += 2
        else:
            sys.stderr.write(f"sacct: unrecognized option '{a}'\n")
            return 1
    missing = [f for f in FLAGS if f not in opts]
    if missing or opts.get("--format", "").lower() != FIELDS:
        sys.stderr.write(f"sacct stand-in: expected {FLAGS} and --format {FIELDS}, got {argv}\n")
        return 1
    start, end = ts(opts["--starttime"]), ts(opts["--endtime"])
    path = os.environ["SACCT_STANDIN_DATA"]
    opener = gzip.open if path.endswith(".gz") else open
    out = sys.stdout
    with opener(path, "rt", encoding="utf-8") as f:
        for line in f:
            c = line.rstrip("\n").split("|")
            submit = ts(c[10])
            if submit > end:
                continue
            started = c[12] not in ("Unknown", "None") and ts(c[12]) <= end
            ended = started and c[13] not in ("Unknown", "None") and ts(c[13]) <= end
            if ended and ts(c[13]) < start:
                continue  # over before the window
            if not started:
                c[12], c[13], c[14], c[16], c[24] = "Unknown", "Unknown", "00:00:00", "PENDING", "None assigned"
                c[22] = ""
            elif not ended:
                c[13], c[14], c[16] = "Unknown", elapsed((end - ts(c[12])).total_seconds()), "RUNNING"
            out.write("|".join(c) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
