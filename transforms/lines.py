"""Read a log as chunks of numbered text lines, streaming, whatever its compression or encoding.

Every physical line comes back exactly once, so callers can reconcile counts. Lines that are not
valid UTF-8 are returned in `bad` with their line number (decoded lossily for the quarantine).
"""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import polars as pl

CHUNK_BYTES = 8 * 1024 * 1024


@dataclass
class LineChunk:
    lines: pl.DataFrame  # line_no: Int64 (1-based), line: Utf8 (no trailing CR/LF)
    bad: pl.DataFrame  # line_no, raw: lines that are not valid UTF-8


def open_binary(path: str | Path) -> BinaryIO:
    """Open a file for reading, transparently gunzipping by magic number (not by name)."""
    f = open(path, "rb")
    magic = f.read(2)
    f.seek(0)
    if magic == b"\x1f\x8b":
        return gzip.GzipFile(fileobj=f)  # type: ignore[return-value]
    return f


def read_head(path: str | Path, max_lines: int = 200, max_bytes: int = 1 << 20) -> list[str]:
    """First lines of a file, decoded lossily: enough to sniff its format and header."""
    with open_binary(path) as f:
        data = f.read(max_bytes)
    text = data.decode("utf-8", errors="replace")
    return [ln.rstrip("\r") for ln in text.split("\n")[:max_lines]]


def _to_frame(text: str, first_line_no: int) -> pl.DataFrame:
    s = pl.Series("line", [text]).str.split("\n").explode()
    df = s.to_frame().with_columns(pl.col("line").str.strip_suffix("\r"))
    return df.with_row_index("line_no", offset=first_line_no).with_columns(pl.col("line_no").cast(pl.Int64)).select("line_no", "line")


def _decode(block: bytes, first_line_no: int) -> LineChunk:
    try:
        return LineChunk(_to_frame(block.decode("utf-8"), first_line_no), pl.DataFrame(schema={"line_no": pl.Int64, "raw": pl.Utf8}))
    except UnicodeDecodeError:
        good_no, good, bad_no, bad = [], [], [], []
        for i, raw in enumerate(block.split(b"\n")):
            try:
                good.append(raw.decode("utf-8").rstrip("\r"))
                good_no.append(first_line_no + i)
            except UnicodeDecodeError:
                bad.append(raw.decode("utf-8", errors="replace").rstrip("\r"))
                bad_no.append(first_line_no + i)
        return LineChunk(
            pl.DataFrame({"line_no": good_no, "line": good}, schema={"line_no": pl.Int64, "line": pl.Utf8}),
            pl.DataFrame({"line_no": bad_no, "raw": bad}, schema={"line_no": pl.Int64, "raw": pl.Utf8}),
        )


def iter_line_chunks(path: str | Path, chunk_bytes: int = CHUNK_BYTES) -> Iterator[LineChunk]:
    """Yield the file's lines in chunks of about `chunk_bytes`, split on line boundaries.

    A final newline does not make an extra empty line; a missing one loses nothing.
    """
    line_no = 1
    rest = b""
    with open_binary(path) as f:
        while True:
            data = f.read(chunk_bytes)
            if not data:
                break
            data = rest + data
            cut = data.rfind(b"\n")
            if cut < 0:
                rest = data
                continue
            block, rest = data[:cut], data[cut + 1 :]
            chunk = _decode(block, line_no)
            line_no += block.count(b"\n") + 1
            yield chunk
    if rest:
        yield _decode(rest, line_no)
