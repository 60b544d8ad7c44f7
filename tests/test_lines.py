"""Every physical line comes back once, numbered as the file numbers it, whatever the bytes."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from metapilot.transforms.lines import LineBlock, iter_line_chunks

# bytes rich in what line splitting trips on: newlines, CRs, empty lines, separators, non-ASCII, invalid UTF-8
pieces = st.sampled_from([b"\n", b"\r", b"\r\n", b"\n\n", b"|", b"a", b"42", b" ", b"\x00", b"\x1f", b'"', "é".encode(),
                          "€".encode(), b"\xff", b"\xc3"])
blocks = st.lists(pieces, max_size=40).map(b"".join)


def expected(block: bytes, first: int) -> tuple[list[tuple[int, str]], list[int]]:
    """The reference reading: a split on `\\n`, one trailing CR off each line; lines that are not UTF-8 are bad."""
    good, bad = [], []
    for i, raw in enumerate(block.split(b"\n")):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            bad.append(first + i)
            continue
        good.append((first + i, text[:-1] if text.endswith("\r") else text))
    return good, bad


@settings(max_examples=300, deadline=None)
@given(block=blocks, first=st.integers(1, 10**9))
def test_a_block_decodes_to_the_split_of_its_lines(block, first):
    chunk = LineBlock(block, first).decode()
    good, bad = expected(block, first)
    if bad:  # one invalid line sends the block line by line: the valid lines still come back, the others as bad
        assert chunk.bad["line_no"].to_list() == bad
    assert list(zip(chunk.lines["line_no"].to_list(), chunk.lines["line"].to_list())) == good
    assert chunk.lines.schema["line_no"] == chunk.bad.schema["line_no"]


def test_final_newline_and_empty_block():
    assert LineBlock(b"", 7).decode().lines.rows() == [(7, "")]
    assert LineBlock(b"a\r\n\r\n", 1).decode().lines.rows() == [(1, "a"), (2, ""), (3, "")]
    assert LineBlock(b"a\r\r\nb\r", 1).decode().lines.rows() == [(1, "a\r"), (2, "b")]


@settings(max_examples=40, deadline=None)
@given(lines=st.lists(blocks.filter(lambda b: b"\n" not in b), min_size=1, max_size=30), chunk=st.integers(1, 64),
       final_newline=st.booleans())
def test_a_file_in_chunks_numbers_every_line_once(tmp_path_factory, lines, chunk, final_newline):
    path = tmp_path_factory.mktemp("lines") / "log"
    content = b"\n".join(lines) + (b"\n" if final_newline else b"")
    path.write_bytes(content)
    chunks = list(iter_line_chunks(path, chunk))
    numbers = sorted(n for c in chunks for n in c.lines["line_no"].to_list() + c.bad["line_no"].to_list())
    n_lines = len(content.split(b"\n")) - content.endswith(b"\n") if content else 0  # a final newline starts no line
    assert numbers == list(range(1, n_lines + 1))
