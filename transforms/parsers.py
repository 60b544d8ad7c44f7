"""One entry point over every log format: detect it from the content, then parse chunk by chunk.

Yields `(ParseResult, raw_lines)` pairs; `raw_lines` (line_no, line) lets the loader quarantine
a line that a later check rejects with its raw text. Lines that are not UTF-8 are quarantined here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import polars as pl
from metapilot.transforms.canonical import (
    ParseResult,
    empty_jobs,
    empty_quarantine,
    quarantine_rows,
)
from metapilot.transforms.lines import (
    CHUNK_BYTES,
    iter_line_chunks,
    open_binary,
    read_head,
)

FORMATS = ("sacct", "sacct-json", "pbs", "swf")


class UnknownFormatError(ValueError):
    """The content matches no supported format (or not the one asked for)."""


@dataclass
class ParseOptions:
    fmt: str = "auto"
    cluster: str = "default"
    timezone: str = "UTC"
    delimiter: str | None = None
    fields: list[str] | None = None
    chunk_bytes: int = CHUNK_BYTES
    detected: str | None = None  # filled in by iter_parse


def _with_bad_lines(res: ParseResult, bad: pl.DataFrame) -> ParseResult:
    if not bad.height:
        return res
    q = quarantine_rows(bad["line_no"], bad["raw"], "line is not valid UTF-8 text (binary data or a wrong encoding): "
                        "re-export the log as UTF-8")
    res.quarantine = pl.concat([res.quarantine, q], how="vertical_relaxed")
    res.lines_read += bad.height
    return res


def _resolve_format(path: Path, opts: ParseOptions, head: list[str]) -> str:
    from metapilot.transforms.detect import detect_format

    if opts.fmt != "auto":
        if opts.fmt not in FORMATS:
            raise UnknownFormatError(f"unknown --format {opts.fmt!r}: use one of auto, {', '.join(FORMATS)}")
        return opts.fmt
    if opts.delimiter or opts.fields:
        return "sacct"
    fmt = detect_format(head)
    if fmt is None:
        raise UnknownFormatError(
            "could not recognise the log format from its content (supported: Slurm sacct text and --json, "
            "PBS/Torque accounting, SWF); if it is sacct output with an unusual layout, pass --format sacct "
            "with --delimiter and --fields"
        )
    return fmt


def iter_parse(path: str | Path, opts: ParseOptions) -> Iterator[tuple[ParseResult, pl.DataFrame | None]]:
    """Parse a file of any supported format in chunks; every physical line is accounted for."""
    path = Path(path)
    head = read_head(path)
    fmt = _resolve_format(path, opts, head)
    opts.detected = fmt
    if fmt == "sacct-json":
        from metapilot.transforms.sacct_json import parse_sacct_json

        with open_binary(path) as f:
            text = f.read().decode("utf-8", errors="replace")
        yield parse_sacct_json(text, opts.cluster, opts.timezone), None
        return
    parse_chunk = _chunk_parser(fmt, head, opts)
    n_jobs = 0
    for chunk in iter_line_chunks(path, opts.chunk_bytes):
        res = parse_chunk(chunk.lines) if chunk.lines.height else ParseResult(empty_jobs(), empty_quarantine(), 0)
        n_jobs += res.jobs.height
        yield _with_bad_lines(res, chunk.bad), chunk.lines
    if fmt == "swf":
        from metapilot.transforms.swf import parse_swf_header, swf_count_warning

        warning = swf_count_warning(parse_swf_header(head), n_jobs)
        if warning:
            yield ParseResult(empty_jobs(), empty_quarantine(), 0, warnings=[warning]), None


def _chunk_parser(fmt: str, head: list[str], opts: ParseOptions):
    """A function chunk -> ParseResult for a line-oriented format, configured from the file's head."""
    if fmt == "swf":
        from metapilot.transforms.swf import parse_swf_chunk, parse_swf_header

        header = parse_swf_header(head)
        return lambda chunk: parse_swf_chunk(chunk, header, opts.cluster)
    if fmt == "pbs":
        from metapilot.transforms.pbs import parse_pbs_chunk

        return lambda chunk: parse_pbs_chunk(chunk, opts.cluster, opts.timezone)
    from metapilot.transforms.sacct import parse_sacct_chunk, sniff_sacct

    cfg = sniff_sacct(head, opts.delimiter, opts.fields)
    if cfg is None:
        raise UnknownFormatError(
            "this looks like sacct output but its columns could not be identified: export with "
            "`sacct --parsable2` and a header line, or pass --fields (comma-separated column names) and --delimiter"
        )
    overrides = {k: v for k, v in (("cluster", opts.cluster), ("timezone", opts.timezone), ("tz", opts.timezone))
                 if k in {f.name for f in dataclasses.fields(cfg)}}
    cfg = dataclasses.replace(cfg, **overrides)
    return lambda chunk: parse_sacct_chunk(chunk, cfg)


def parse_jobs(path: str | Path, opts: ParseOptions | None = None) -> pl.DataFrame:
    """Every job row of a file as one canonical frame (no warehouse): for benchmarks, tests and
    one-off analyses of a trace. Quarantined lines are left out; use `iter_parse` to see them."""
    frames = [res.jobs for res, _ in iter_parse(path, opts or ParseOptions())]
    return pl.concat(frames) if frames else empty_jobs()
