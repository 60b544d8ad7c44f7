"""Tell an accounting log's format from its first lines (content only, never the file name).

Returns one of `sacct`, `sacct-json`, `pbs`, `swf`, `sge` (SGE/UGE `accounting`), `lsf` (LSF
`lsb.acct`), or None when the content is none of these (CSV exports of other tools, JSON that is
not `sacct --json`). None is the safe answer: the ingest refuses the file rather than
quarantining every line of it.

Rules, tried in order, each on the non-blank lines:
1. sacct-json: the text starts with `{` and has a `"jobs":` key.
2. pbs: most lines are `MM/DD/YYYY HH:MM:SS;T;id;...` records.
3. swf: `;` header lines that carry SWF keys (MaxJobs, UnixStartTime, ...), or most data lines are
   18+ numeric tokens.
3a. lsf: most lines are lsb.acct records: a quoted event type, a quoted version, an epoch
   (`"JOB_FINISH" "10.108" 1644826549 ...`); `#` lines are ignored.
3b. sge: most non-`#` lines split on `:` into 43+ fields whose job number (6th), submission,
   start and end epochs (9th-11th), failed and exit status (12th, 13th) are integers; the
   `# Version:` header lines SGE writes are ignored.
4. sacct, with a header: the first line splits on `|` (or tab, `,` or `;`, i.e. `--delimiter`)
   into names that are nearly all sacct fields, JobID among them.
5. sacct, headerless `--parsable2`: most lines split on `|` into the same number of fields (3+),
   with a Slurm job id field and a Slurm state or an ISO timestamp (Open XDMoD's 26 fields,
   `State|JobID|...` exports). `#` comment lines are ignored, as the sacct parser does.
"""

from __future__ import annotations

import json
import re
from collections import Counter

SACCT_FIELDS: frozenset[str] = frozenset(name.lower() for name in """
Account AdminComment AllocCPUS AllocGRES AllocNodes AllocTRES AssocID AveCPU AveCPUFreq AveDiskRead
AveDiskWrite AvePages AveRSS AveVMSize BlockID Cluster Comment Constraints Container ConsumedEnergy
ConsumedEnergyRaw CPUTime CPUTimeRAW DBIndex DerivedExitCode Elapsed ElapsedRaw Eligible End
ExitCode Extra FailedNode Flags GID Group JobID JobIDRaw JobName Layout Licenses MaxDiskRead
MaxDiskReadNode MaxDiskReadTask MaxDiskWrite MaxDiskWriteNode MaxDiskWriteTask MaxPages MaxPagesNode
MaxPagesTask MaxRSS MaxRSSNode MaxRSSTask MaxVMSize MaxVMSizeNode MaxVMSizeTask McsLabel MinCPU
MinCPUNode MinCPUTask NCPUS NNodes NodeList NTasks Partition Planned PlannedCPU PlannedCPURAW
Priority QOS QOSRAW QOSREQ Reason ReqCPUFreq ReqCPUFreqGov ReqCPUFreqMax ReqCPUFreqMin ReqCPUS
ReqGRES ReqMem ReqNodes ReqTRES Reservation ReservationId Reserved ResvCPU ResvCPURAW Restarts
Start State StdErr StdIn StdOut Submit SubmitLine Suspended SystemComment SystemCPU Timelimit
TimelimitRaw TotalCPU TRESUsageInAve TRESUsageInMax TRESUsageInMaxNode TRESUsageInMaxTask
TRESUsageInMin TRESUsageInMinNode TRESUsageInMinTask TRESUsageInTot TRESUsageOutAve TRESUsageOutMax
TRESUsageOutMaxNode TRESUsageOutMaxTask TRESUsageOutMin TRESUsageOutMinNode TRESUsageOutMinTask
TRESUsageOutTot UID User UserCPU WCKey WCKeyID WorkDir
""".split())
SLURM_STATE_RE = re.compile(
    r"^(BOOT_FAIL|CANCELLED( by \d+)?|COMPLETED|CONFIGURING|COMPLETING|DEADLINE|FAILED|NODE_FAIL|"
    r"OUT_OF_MEMORY|PENDING|PREEMPTED|RUNNING|REQUEUED|RESIZING|REVOKED|SUSPENDED|TIMEOUT|UNKNOWN)$"
)
SLURM_JOBID_RE = re.compile(r"^\d+(_(\d+|\[[\d,\-%]+\]))?(\+\d+)?(\.(batch|extern|interactive|\d+))?$")
ISO_TIME_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}$")
PBS_RECORD_RE = re.compile(r"^\d{2}/\d{2}/\d{4} \d{2}:\d{2}:\d{2};[A-Za-z];[^;]+(;|$)")
SWF_HEADER_KEYS = (
    "Version", "Computer", "Installation", "Acknowledge", "Information", "Conversion", "MaxJobs",
    "MaxRecords", "Preemption", "UnixStartTime", "TimeZone", "TimeZoneString", "StartTime",
    "EndTime", "MaxNodes", "MaxProcs", "MaxRuntime", "MaxMemory", "AllowOveruse", "MaxQueues",
    "Queues", "Queue", "MaxPartitions", "Partitions", "Partition", "Note",
)
_SWF_HEADER_RE = re.compile(r"^;\s*(" + "|".join(SWF_HEADER_KEYS) + r")\s*:")
_NUMBER_RE = re.compile(r"^-?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$")
LSF_RECORD_RE = re.compile(r'^"[A-Z][A-Z0-9_]*" "[^"\s]*" -?\d+(?:\s|$)')
SGE_MIN_FIELDS = 43
_SGE_INT_FIELDS = (5, 8, 9, 10, 11, 12)
_INT_RE = re.compile(r"^-?\d+$")
MAJORITY = 0.8  # share of candidate lines that must look right: tolerates a few broken lines
HEADER_DELIMITERS = ("|", "\t", ",", ";")


def _content_lines(head_lines: list[str]) -> list[str]:
    lines = [ln.rstrip("\r\n") for ln in head_lines]
    if lines and lines[0].startswith("\ufeff"):
        lines[0] = lines[0][1:]
    return [ln for ln in lines if ln.strip()]


def _mostly(lines: list[str], test) -> bool:
    """True when at least MAJORITY of `lines` (and at least one) pass `test`."""
    if not lines:
        return False
    return sum(1 for ln in lines if test(ln)) >= MAJORITY * len(lines)


def _is_sacct_json(lines: list[str]) -> bool:
    """`sacct --json`: a JSON object with a top-level `jobs` key (seen in the head, or parsed)."""
    if not lines or not lines[0].lstrip().startswith("{"):
        return False
    text = "\n".join(lines)
    try:
        return isinstance(obj := json.loads(text), dict) and "jobs" in obj
    except ValueError:
        return re.search(r'^\s{0,8}"jobs"\s*:', text, re.MULTILINE) is not None


def _is_swf(lines: list[str]) -> bool:
    """SWF header keys in `;` lines, or data lines of 18+ numbers (with a header, half of them do)."""
    comments = [ln for ln in lines if ln.lstrip().startswith(";")]
    data = [ln for ln in lines if not ln.lstrip().startswith(";")]
    header_keys = sum(1 for ln in comments if _SWF_HEADER_RE.match(ln.lstrip()))

    def numeric_row(ln: str) -> bool:
        toks = ln.split()
        return len(toks) >= 18 and all(_NUMBER_RE.match(t) for t in toks[:18])

    if data:
        if header_keys and sum(map(numeric_row, data)) * 2 >= len(data):
            return True  # an SWF header says so: a few broken lines (a NaN token) are quarantined, not a reason to give up
        return _mostly(data, numeric_row)
    return header_keys >= 2


def _is_lsf(lines: list[str]) -> bool:
    """lsb.acct / lsb.events records: quoted event type, quoted version, event time."""
    return _mostly([ln for ln in lines if not ln.startswith("#")], lambda ln: LSF_RECORD_RE.match(ln) is not None)


def _is_sge(lines: list[str]) -> bool:
    """SGE/UGE accounting records: 43+ colon-separated fields, integers where SGE writes them."""

    def record(ln: str) -> bool:
        f = ln.split(":")
        return len(f) >= SGE_MIN_FIELDS and all(_INT_RE.match(f[i]) for i in _SGE_INT_FIELDS)

    return _mostly([ln for ln in lines if not ln.startswith("#")], record)


def _sacct_header(lines: list[str]) -> bool:
    """A header line of sacct field names on any delimiter `--delimiter` is commonly given."""
    first = next((ln for ln in lines if not ln.startswith("#")), None)
    if first is None:
        return False
    for delim in HEADER_DELIMITERS:
        names = [n.strip().lower() for n in first.split(delim)]
        names = [n for n in names if n]
        if len(names) < 2 or not ({"jobid", "jobidraw"} & set(names)):
            continue
        known = sum(1 for n in names if n in SACCT_FIELDS)
        if known >= 0.9 * len(names):
            return True
    return False


def _sacct_headerless(lines: list[str]) -> bool:
    """`--parsable2 --noheader` with `|`: consistent field counts, job ids, states or timestamps."""
    rows = [ln.split("|") for ln in lines if not ln.startswith("#")]
    if not rows:
        return False
    counts = Counter(len(r) for r in rows)
    width, n = counts.most_common(1)[0]
    if width < 3 or n < MAJORITY * len(rows):
        return False

    def sacct_row(fields: list[str]) -> bool:
        f = [x.strip() for x in fields]
        has_id = any(SLURM_JOBID_RE.match(x) for x in f)
        has_state_or_time = any(SLURM_STATE_RE.match(x) or ISO_TIME_RE.match(x) for x in f)
        return has_id and has_state_or_time

    return _mostly(rows, sacct_row)


def detect_format(head_lines: list[str]) -> str | None:
    """The format of a log from its first lines: `sacct`, `sacct-json`, `pbs`, `swf`, `sge`,
    `lsf`, or None."""
    lines = _content_lines(head_lines)
    if not lines:
        return None
    if _is_sacct_json(lines):
        return "sacct-json"
    if lines[0].lstrip().startswith(("{", "[")):
        return None  # other JSON: not a job log we know
    if _mostly(lines, lambda ln: PBS_RECORD_RE.match(ln) is not None):
        return "pbs"
    if _is_swf(lines):
        return "swf"
    if _is_lsf(lines):
        return "lsf"
    if _is_sge(lines):
        return "sge"
    if _sacct_header(lines) or _sacct_headerless(lines):
        return "sacct"
    return None


SUPPORTED = ("Slurm sacct text and --json, PBS/Torque accounting, SWF, SGE/UGE accounting, LSF lsb.acct; for node "
             "placement, openb node and pod lists and Prometheus text exposition or query_range JSON")


def _binary(lines: list[str]) -> bool:
    """Whether a head looks like binary data: replacement characters (undecodable bytes) or control
    bytes other than tab in a good share of its text."""
    text = "".join(lines)
    if not text:
        return False
    odd = sum(1 for ch in text if ch == "\ufffd" or (ord(ch) < 32 and ch != "\t"))
    return odd >= max(1, 0.05 * len(text))


def unrecognised_reason(head_lines: list[str]) -> str:
    """Why a file's content names no format, with only the hints that apply: an empty file is
    empty (nothing to load, no option helps); binary data is not a log (no --encoding reads it);
    text is compared with the supported formats and the options that read an unusual sacct layout."""
    if not _content_lines(head_lines):
        return ("the file is empty (no line with content): nothing to load; if it is still being written, ingest it "
                "once it is complete")
    if _binary(head_lines):
        return ("the file is binary data, not a text log (undecodable or control bytes in its first lines): check that "
                "it is the right file; an archive other than .gz must be unpacked first")
    return (f"could not recognise the log format from its content (supported: {SUPPORTED}); if it is sacct output "
            "with an unusual layout, pass --format sacct with --delimiter and --fields")


__all__ = ["detect_format", "unrecognised_reason", "SUPPORTED"]
