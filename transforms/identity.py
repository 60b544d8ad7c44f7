"""Where the identity fields sit in a raw log line, per format (SPEC §8: a quarantined line keeps
its raw text with the identity fields replaced by their keyed hashes).

Each parser that knows its layout exposes `identity_spans(line) -> [(start, end, kind), ...]`
(character offsets into the line, `kind` one of user, user_id, group, account, job_name,
command, mail, path, text); `identity_spans(fmt, line)` dispatches on the detected format and
returns None for a format without such a function (the caller then uses its generic rule).
`mask_identities` applies a hash function to the spans.

    from metapilot.transforms.identity import mask_identities
    masked = mask_identities("sge", raw_line, lambda v: keyed_hash(v, key))
"""

from __future__ import annotations

from collections.abc import Callable


def _spans_fn(fmt: str | None) -> Callable[[str], list[tuple[int, int, str]]] | None:
    if fmt in ("sge", "uge"):
        from metapilot.transforms.sge import identity_spans

        return identity_spans
    if fmt == "lsf":
        from metapilot.transforms.lsf import identity_spans

        return identity_spans
    return None


def identity_spans(fmt: str | None, line: str) -> list[tuple[int, int, str]] | None:
    """The identity fields of `line` for format `fmt`, or None when the format has no layout here."""
    fn = _spans_fn(fmt)
    return None if fn is None else fn(line)


def mask_identities(fmt: str | None, line: str, hash_value: Callable[[str], str]) -> str | None:
    """`line` with every identity field replaced by `hash_value(field)`; None when `fmt` has no
    layout here (use the generic rule)."""
    spans = identity_spans(fmt, line)
    if spans is None:
        return None
    out, pos = [], 0
    for start, end, _kind in sorted(spans):
        if start < pos:
            continue
        out.append(line[pos:start])
        out.append(hash_value(line[start:end]))
        pos = end
    out.append(line[pos:])
    return "".join(out)


__all__ = ["identity_spans", "mask_identities"]
