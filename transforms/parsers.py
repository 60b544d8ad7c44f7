"""One entry point over every log format: detect it from the content, then parse chunk by chunk.

Yields `(ParseResult, raw_lines)` pairs; `raw_lines` (line_no, line) lets the loader quarantine
a line that a later check rejects with its raw text. Lines that are not valid in the file's
encoding (`ParseOptions.encoding`, UTF-8 by default) are quarantined here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import polars as pl
from metapilot.ground.ahead import map_ahead
from metapilot.transforms.canonical import (
    ParseResult,
    empty_jobs,
    empty_quarantine,
    quarantine_rows,
)
from metapilot.transforms.lines import (
    CHUNK_BYTES,
    DEFAULT_ENCODING,
    check_encoding,
    LineBlock,
    iter_line_blocks,
    open_binary,
    read_head,
)

FORMATS = ("sacct", "sacct-json", "pbs", "swf", "sge", "lsf")
FORMAT_ALIASES = {"uge": "sge", "lsb.acct": "lsf", "slurm": "sacct", "torque": "pbs"}
# The values of jobs.source_format: the formats, "uge" for SGE-format rows with millisecond epochs,
# and "openb" for pods of Alibaba's openb pod lists (loaded by warehouse.placement_ingest).
SOURCE_FORMATS = (*FORMATS, "uge", "openb")


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
    encoding: str | None = None  # None: UTF-8
    detected: str | None = None  # filled in by iter_parse
    mem_unit: str = "kb"  # SWF's memory fields: kb (the standard), b (Alea's extended SWF) or mb
    workers: int = 1  # chunks decoded and parsed at once, in threads (polars releases the GIL)


def undecodable_reason(encoding: str | None) -> str:
    """The quarantine reason of a line that is not valid text in `encoding`."""
    enc = encoding or DEFAULT_ENCODING
    hint = ("re-run ingest with --encoding latin-1 (or the log's encoding: older sites' logs often hold Latin-1 "
            "names)" if enc.replace("_", "-").lower() in ("utf-8", "utf8") else "check --encoding")
    return f"line is not valid {enc} text (binary data or another encoding): {hint}"


def _with_bad_lines(res: ParseResult, bad: pl.DataFrame, encoding: str | None = None) -> ParseResult:
    if not bad.height:
        return res
    q = quarantine_rows(bad["line_no"], bad["raw"], undecodable_reason(encoding))
    res.quarantine = pl.concat([res.quarantine, q], how="vertical_relaxed")
    res.lines_read += bad.height
    return res


def _resolve_format(path: Path, opts: ParseOptions, head: list[str]) -> str:
    from metapilot.transforms.detect import detect_format, unrecognised_reason

    if opts.fmt != "auto":
        fmt = FORMAT_ALIASES.get(opts.fmt, opts.fmt)
        if fmt not in FORMATS:
            raise UnknownFormatError(f"unknown --format {opts.fmt!r}: use one of auto, {', '.join(FORMATS)} (uge = sge), "
                                     "or for node placement openb-nodes, openb-pods, prom-text, prom-range")
        return fmt
    if opts.delimiter or opts.fields:
        return "sacct"
    fmt = detect_format(head)
    if fmt is None:
        raise UnknownFormatError(unrecognised_reason(head))
    return fmt


def iter_parse(path: str | Path, opts: ParseOptions) -> Iterator[tuple[ParseResult, pl.DataFrame | None]]:
    """Parse a file of any supported format in chunks; every physical line is accounted for.

    `opts.workers` > 1 decodes and parses that many chunks at once in threads (a chunk's parse
    is independent of the others'), still yielding them in file order."""
    path = Path(path)
    encoding = check_encoding(opts.encoding)
    head = read_head(path, encoding=encoding)
    fmt = _resolve_format(path, opts, head)
    opts.detected = fmt
    if fmt == "sacct-json":
        from metapilot.transforms.sacct_json import parse_sacct_json

        with open_binary(path) as f:
            text = f.read().decode(encoding, errors="replace")
        yield parse_sacct_json(text, opts.cluster, opts.timezone), None
        return
    parse_chunk = _chunk_parser(fmt, head, opts)

    def parse_block(block: LineBlock) -> tuple[ParseResult, pl.DataFrame]:
        chunk = block.decode(encoding)
        res = parse_chunk(chunk.lines) if chunk.lines.height else ParseResult(empty_jobs(), empty_quarantine(), 0)
        return _with_bad_lines(res, chunk.bad, opts.encoding), chunk.lines

    n_jobs = 0
    blocks = iter_line_blocks(path, opts.chunk_bytes)
    parsed = map(parse_block, blocks) if opts.workers <= 1 else map_ahead(parse_block, blocks, opts.workers, name="parse")
    for res, lines in parsed:
        n_jobs += res.jobs.height
        yield res, lines
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
        return lambda chunk: parse_swf_chunk(chunk, header, opts.cluster, opts.mem_unit)
    if fmt == "pbs":
        from metapilot.transforms.pbs import parse_pbs_chunk

        return lambda chunk: parse_pbs_chunk(chunk, opts.cluster, opts.timezone)
    if fmt == "sge":
        from metapilot.transforms.sge import parse_sge_chunk

        return lambda chunk: parse_sge_chunk(chunk, opts.cluster)
    if fmt == "lsf":
        from metapilot.transforms.lsf import parse_lsf_chunk

        return lambda chunk: parse_lsf_chunk(chunk, opts.cluster)
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
