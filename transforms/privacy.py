"""Keyed hashing of user, account, group and job names (SPEC §8).

HMAC-SHA256 with a per-site secret: the same name gives the same id across files and runs of one
site, but ids cannot be reversed or matched across sites without the key. Names have few distinct
values, so each distinct value is hashed once and mapped back with a polars join.
"""

from __future__ import annotations

import hashlib
import hmac
import re

import polars as pl
from metapilot.transforms.canonical import SLURM_STATES

NAME_COLUMNS: dict[str, str] = {
    "user_name": "user_id",
    "account_name": "account_id",
    "group_name": "group_id",
    "job_name": "job_name",
}


def keyed_hash(value: str, key: bytes) -> str:
    """HMAC-SHA256 of one name, hex, truncated to 16 bytes (collisions are negligible at site scale)."""
    return hmac.new(key, value.encode("utf-8"), hashlib.sha256).hexdigest()[:32]


class NameCache(dict):
    """name -> keyed hash, for one file's chunks (and its quarantined lines), plus the same pairs as
    a frame, so that a chunk's names already hashed are found by a join instead of a Python loop
    over them. Bounded: past `max_names` it starts again (it only saves work)."""

    def __init__(self, max_names: int = 1_000_000) -> None:
        super().__init__()
        self.max_names = max_names
        self.known: pl.DataFrame | None = None

    def hashes(self, values: pl.Series, key: bytes) -> pl.Series:
        """The keyed hash of each of `values` (distinct, non-null text), in their order."""
        v = values.alias("v").to_frame()
        if self.known is not None:
            found = v.join(self.known, on="v", how="left", maintain_order="left")
            missing = found.filter(pl.col("h").is_null()).get_column("v")
            if missing.is_empty():
                return found.get_column("h")
        else:
            missing = values
        if self.known is not None and self.known.height + len(missing) > self.max_names:
            self.known = None
            self.clear()
        new = pl.DataFrame({"v": missing, "h": [self.get(x) or self.setdefault(x, keyed_hash(x, key)) for x in missing.to_list()]},
                           schema={"v": pl.Utf8, "h": pl.Utf8})
        self.known = new if self.known is None else pl.concat([self.known, new], rechunk=False)
        return v.join(self.known, on="v", how="left", maintain_order="left").get_column("h")


def pseudonymise(df: pl.DataFrame, key: bytes, keep_names: bool = False, cache: dict | None = None) -> pl.DataFrame:
    """Replace raw name columns with their warehouse columns: keyed hashes, or raw with `keep_names`.

    `cache` (name -> hash) carries hashes across the chunks of a file, so each distinct name is
    hashed once per file however many chunks it appears in."""
    cache = {} if cache is None else cache
    out = df
    for raw_col, id_col in NAME_COLUMNS.items():
        if raw_col not in out.columns:
            out = out.with_columns(pl.lit(None, dtype=pl.Utf8).alias(id_col))
            continue
        if keep_names:
            out = out.rename({raw_col: id_col}) if raw_col != id_col else out
            continue
        out = out.drop(raw_col).with_columns(_hashed(out.get_column(raw_col), key, cache).alias(id_col))
    return out


def _hashed(s: pl.Series, key: bytes, cache: dict) -> pl.Series:
    """The keyed hash of every value of `s` (null stays null), each distinct value hashed once:
    a categorical of the batch's own gives the distinct values and each row's code, and the
    hashes are gathered by code (cheaper than `unique` and a join on text)."""
    cats = pl.Categories.random()
    cat = s.cast(pl.Utf8).cast(pl.Categorical(cats))  # keep it alive: its categories live as long as it does
    codes = cat.to_physical()
    distinct = cats.to_series()
    if len(distinct) <= (codes.max() or 0):  # not dense after all: hash each distinct value and join
        uniques = s.drop_nulls().unique()
        mapping = pl.DataFrame({"v": uniques, "h": [cache.get(v) or cache.setdefault(v, keyed_hash(v, key))
                                                    for v in uniques.to_list()]}, schema={"v": pl.Utf8, "h": pl.Utf8})
        return s.to_frame("v").join(mapping, on="v", how="left", maintain_order="left").get_column("h")
    if isinstance(cache, NameCache):
        hashes = cache.hashes(distinct, key)
    else:
        hashes = pl.Series([cache.get(v) or cache.setdefault(v, keyed_hash(v, key)) for v in distinct.to_list()], dtype=pl.Utf8)
    out = hashes.gather(codes)
    del cat
    return out


# ---------------------------------------------------------------------------------------------
# Quarantined lines (SPEC §8): the stored raw line has its identity fields replaced by their keyed
# hashes (the same hashes as in `jobs`, so a quarantined line can still be matched to its user).
# Known layouts are redacted field by field with an allowlist (a column we do not know, such as a
# working directory, is hashed too); a line whose layout cannot be read keeps only the tokens that
# cannot be names (numbers, times, sizes, job states) and hashes every other word.

# sacct columns that never hold a name (everything else, known or not, is hashed)
SACCT_SAFE_FIELDS: frozenset[str] = frozenset(
    "jobid jobidraw cluster partition qos submit eligible start end elapsed elapsedraw exitcode derivedexitcode "
    "state nnodes allocnodes ncpus alloccpus reqcpus reqnodes reqmem reqtres alloctres reqgres allocgres timelimit "
    "timelimitraw nodelist constraints suspended maxdiskread maxdiskwrite maxpages maxrss maxvmsize cputime "
    "cputimeraw usercpu systemcpu totalcpu priority reservation".split()
)
# PBS attributes that never hold a name (Resource_List.* and resources_used.* too)
PBS_SAFE_KEYS: frozenset[str] = frozenset(
    "queue ctime qtime etime start end Exit_status exec_host exec_vnode session run_count "
    "array_indices_submitted job_array_request eligible_time total_execution_slots unique_node_count "
    "exec_port alt_id".split()
)
PBS_SAFE_PREFIXES = ("Resource_List.", "resources_used.")
SWF_IDENTITY_FIELDS = (11, 12, 13)  # 0-based: user, group, executable numbers
# sacct --json: string values under keys with these parts are hashed; under JSON_SAFE_KEYS kept;
# any other string keeps only its tokens that cannot be names
JSON_IDENTITY_PARTS = ("user", "group", "account", "name", "uid", "gid", "comment", "directory", "line", "script",
                       "mail", "wckey", "std", "container", "extra", "mcs", "path", "command", "label", "association")
JSON_SAFE_KEYS: frozenset[str] = frozenset(
    "cluster partition qos state current reason flags nodes constraints reservation tres type job_id array het "
    "time exit_code status signal derived_exit_code allocation_nodes required priority".split()
)
_SAFE_WORDS = frozenset(SLURM_STATES) | frozenset(
    ["Unknown", "None", "UNLIMITED", "INVALID", "(null)", "assigned", "by", "Partition_Limit", "N/A", "NA", "n/a",
     "T", "Z"]
)
_SAFE_TOKEN = re.compile(
    r"^(?:[-+]?[\d.:/,()\[\]+\-]*\d[\d.:/,()\[\]+\-]*"  # numbers, times, dates, ranges, exit codes
    r"|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:Z|[+-]\d\d:?\d\d)?"  # ISO date-times
    r"|[\d.]+[KMGTPkmgtp]?[BbNnCc]?"  # sizes: 4000M, 2Gn, 512Kc
    r"|[-+]?\d+(?:\.\d+)?[eE][-+]?\d+"  # 1e6
    r"|[-_.:/;,|=()\[\]*#]*)$"  # punctuation only, empty
)
_TOKENS = re.compile(r"[^\s|;,=\t]+")


def _safe_token(tok: str) -> bool:
    return tok in _SAFE_WORDS or bool(_SAFE_TOKEN.match(tok))


class LineRedactor:
    """Replace the identity fields of raw log lines with their keyed hashes.

    `fmt` is the detected format (sacct, sacct-json, pbs, swf here; SGE and LSF through their
    parsers' `identity_spans`, `transforms.identity`; any other uses the generic rule);
    for sacct, `head` (the file's first lines) and the user's `delimiter`/`fields` give the
    columns, as for the parser. `cache` is shared with `pseudonymise`."""

    def __init__(self, fmt: str | None, key: bytes, cache: dict | None = None, head: list[str] | None = None,
                 delimiter: str | None = None, fields: list[str] | None = None) -> None:
        self.fmt = fmt
        self.key = key
        self.cache = {} if cache is None else cache
        self._sacct = None
        if fmt == "sacct" and head is not None:
            from metapilot.transforms.sacct import sniff_sacct

            self._sacct = sniff_sacct(head, delimiter, fields)

    def _h(self, value: str) -> str:
        return self.cache.get(value) or self.cache.setdefault(value, keyed_hash(value, self.key))

    # -- generic --------------------------------------------------------------------------
    def generic(self, raw: str, found: set[str]) -> str:
        def repl(m: re.Match) -> str:
            tok = m.group(0)
            if _safe_token(tok):
                return tok
            found.add(tok)
            return self._h(tok)

        return _TOKENS.sub(repl, raw)

    # -- formats --------------------------------------------------------------------------
    def _sacct_line(self, raw: str, found: set[str]) -> str:
        cfg = self._sacct
        if cfg is None:
            return self.generic(raw, found)
        names = cfg.names()
        d = cfg.delimiter
        body, tail = raw, ""
        if cfg.trailing_delimiter and raw.endswith(d):
            body, tail = raw[: -len(d)], d
        cells = body.split(d)
        n = len(names)
        if len(cells) > n and names[-1] == "jobname":
            cells = cells[: n - 1] + [d.join(cells[n - 1 :])]
        least = min(cfg.min_fields or n, n)
        if not (least <= len(cells) <= n):
            return self.generic(raw, found)
        out = []
        for name, cell in zip(names, cells):
            if name in SACCT_SAFE_FIELDS or cell.strip() == "":
                out.append(cell)
            else:
                found.add(cell)
                out.append(self._h(cell))
        return d.join(out) + tail

    def _pbs_line(self, raw: str, found: set[str]) -> str:
        parts = raw.split(";", 3)
        if len(parts) < 4:
            return self.generic(raw, found)
        attrs = []
        for tok in re.split(r"(\s+)", parts[3]):
            k, eq, v = tok.partition("=")
            if not eq:
                attrs.append(tok if tok.isspace() or _safe_token(tok) else self.generic(tok, found))
            elif k in PBS_SAFE_KEYS or k.startswith(PBS_SAFE_PREFIXES):
                attrs.append(tok)
            elif v == "":
                attrs.append(tok)
            else:
                found.add(v)
                attrs.append(f"{k}={self._h(v)}")
        stamp, rtype, job = parts[:3]
        rtype = rtype if len(rtype.strip()) <= 1 else self.generic(rtype, found)
        return ";".join([self.generic(stamp, found), rtype, job, "".join(attrs)])

    def _swf_line(self, raw: str, found: set[str]) -> str:
        toks = re.split(r"(\s+)", raw)
        out, i = [], 0
        for tok in toks:
            if tok == "" or tok.isspace():
                out.append(tok)
                continue
            if i in SWF_IDENTITY_FIELDS or not _safe_token(tok):
                found.add(tok)
                out.append(self._h(tok))
            else:
                out.append(tok)
            i += 1
        return "".join(out)

    def _json_value(self, v, found: set[str], mode: str = "other"):
        """mode: 'hide' (hash every scalar), 'safe' (keep), 'other' (keep only name-free tokens)."""
        if isinstance(v, dict):
            out = {}
            for k, x in v.items():
                kl = k.lower()
                sub = ("hide" if mode == "hide" or any(p in kl for p in JSON_IDENTITY_PARTS)
                       else "safe" if kl in JSON_SAFE_KEYS else "other")
                out[k] = self._json_value(x, found, sub)
            return out
        if isinstance(v, list):
            return [self._json_value(x, found, mode) for x in v]
        if mode == "hide" and isinstance(v, (str, int)) and not isinstance(v, bool) and str(v) != "":
            found.add(str(v))
            return self._h(str(v))
        if isinstance(v, str) and mode == "other" and not _safe_token(v):
            return self.generic(v, found)
        return v

    def _json_doc(self, raw: str, found: set[str]) -> str:
        import json

        try:
            doc = json.loads(raw)
        except ValueError:
            return self.generic(raw, found)
        return json.dumps(self._json_value(doc, found))

    def redact(self, raw: str | None) -> tuple[str | None, set[str]]:
        """The line with its identity fields hashed, and the raw values it replaced."""
        found: set[str] = set()
        if raw is None or raw == "":
            return raw, found
        if self.fmt == "sacct":
            out = self._sacct_line(raw, found)
        elif self.fmt == "pbs":
            out = self._pbs_line(raw, found)
        elif self.fmt == "swf":
            out = self._swf_line(raw, found)
        elif self.fmt == "sacct-json":
            out = self._json_doc(raw, found)
        else:
            out = self._by_spans(raw, found)
        return out, found

    def _by_spans(self, raw: str, found: set[str]) -> str:
        """Formats whose parser knows where identity fields sit (`transforms.identity`: SGE, LSF);
        the generic rule for the rest."""
        from metapilot.transforms.identity import mask_identities

        def h(value: str) -> str:
            found.add(value)
            return self._h(value)

        masked = mask_identities(self.fmt, raw, h)
        return self.generic(raw, found) if masked is None else masked

    def frame(self, q: pl.DataFrame) -> pl.DataFrame:
        """A quarantine frame (line_no, raw, reason) with identities hashed in `raw` and, where a
        reason quotes a replaced value, in `reason` too."""
        if not q.height:
            return q
        raws, reasons = [], []
        for raw, reason in zip(q["raw"].to_list(), q["reason"].to_list()):
            red, found = self.redact(raw)
            raws.append(red)
            if reason and found:
                for v in sorted(found, key=len, reverse=True):
                    if any(c.isalpha() for c in v) and v in reason:
                        reason = reason.replace(v, self._h(v))
            reasons.append(reason)
        return q.with_columns(pl.Series("raw", raws, dtype=pl.Utf8), pl.Series("reason", reasons, dtype=pl.Utf8))
