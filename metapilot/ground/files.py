"""File checksums (the ingest manifest and the policy artifacts use the same SHA-256 of the bytes), and
safe file names."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from pathlib import Path


def sha256_file(path: str | Path) -> str:
    """Hex SHA-256 of a file's bytes, read in 1 MiB blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


SUMS = "SHA256SUMS"


def write_sums(folder: str | Path, names: tuple[str, ...]) -> str:
    """Write `folder/SHA256SUMS` (`sha256sum -c` format) for `names`; return the SHA-256 of that file
    (what a registry row keeps to anchor the folder)."""
    folder = Path(folder)
    (folder / SUMS).write_text("".join(f"{sha256_file(folder / n)}  {n}\n" for n in names))
    return sha256_file(folder / SUMS)


def read_sums(folder: str | Path) -> dict[str, str]:
    """The files `folder/SHA256SUMS` lists, with their digests ({} when there is no such file)."""
    sums = Path(folder) / SUMS
    listed = {}
    if sums.exists():
        for line in sums.read_text().splitlines():
            digest, _, name = line.partition("  ")
            if name.strip():
                listed[name.strip()] = digest.strip()
    return listed


def sums_problem(folder: str | Path, names: tuple[str, ...], expected_sums_sha256: str | None = None) -> str | None:
    """What is wrong with a folder against its SHA256SUMS (and that file against the registry's
    hash), naming the file and both hashes; None when every file matches."""
    folder = Path(folder)
    sums = folder / SUMS
    if not sums.exists():
        return f"{sums}: missing checksum file."
    if expected_sums_sha256 is not None:
        actual = sha256_file(sums)
        if actual != expected_sums_sha256:
            return f"{sums}: SHA-256 mismatch with the registry: expected {expected_sums_sha256}, actual {actual}."
    listed = read_sums(folder)
    for name in names:
        path = folder / name
        if name not in listed:
            return f"{path}: not listed in {SUMS}."
        if not path.exists():
            return f"{path}: missing (listed in {SUMS})."
        actual = sha256_file(path)
        if actual != listed[name]:
            return f"{path}: SHA-256 mismatch: expected {listed[name]}, actual {actual}."
    return None


def publish_folder(root: str | Path, name: str, write: Callable[[Path], None], names: tuple[str, ...]) -> tuple[Path, str]:
    """Write an artifact folder atomically: `write(tmp)` fills a hidden folder beside it, the
    checksums are added, and it replaces `root/name` in one rename (a half-written folder is never
    seen, and is removed on failure). Returns the folder and the SHA-256 of its SHA256SUMS."""
    import os
    import shutil
    import tempfile

    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=root))
    try:
        write(tmp)
        sums = write_sums(tmp, names)
        final = root / name
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final, sums


def safe_name(text: str) -> str:
    """`text` as one file or folder name (cluster names are free text: 'Site A/gpu' -> 'Site_A_gpu')."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", text)
    return name if name.strip(".") else "_" * max(len(name), 1)  # never '', '.' or '..'


def shown_path(path: str | Path) -> str:
    """A path as text that can be stored and printed: a name that is not valid UTF-8 (bytes a
    filesystem allows) keeps its bytes as backslash escapes (`job\\xff.log`) instead of stopping
    the batch that records it (issue 37)."""
    return str(path).encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
