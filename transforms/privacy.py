"""Keyed hashing of user, account, group and job names (SPEC §8).

HMAC-SHA256 with a per-site secret: the same name gives the same id across files and runs of one
site, but ids cannot be reversed or matched across sites without the key. Names have few distinct
values, so each distinct value is hashed once and mapped back with a polars join.
"""

from __future__ import annotations

import hashlib
import hmac

import polars as pl

NAME_COLUMNS: dict[str, str] = {
    "user_name": "user_id",
    "account_name": "account_id",
    "group_name": "group_id",
    "job_name": "job_name",
}


def keyed_hash(value: str, key: bytes) -> str:
    """HMAC-SHA256 of one name, hex, truncated to 16 bytes (collisions are negligible at site scale)."""
    return hmac.new(key, value.encode("utf-8"), hashlib.sha256).hexdigest()[:32]


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
        uniques = out.get_column(raw_col).drop_nulls().unique()
        mapping = pl.DataFrame(
            {raw_col: uniques, "__hashed": [cache.get(v) or cache.setdefault(v, keyed_hash(v, key)) for v in uniques.to_list()]},
            schema={raw_col: pl.Utf8, "__hashed": pl.Utf8},
        )
        out = out.join(mapping, on=raw_col, how="left", maintain_order="left").drop(raw_col).rename({"__hashed": id_col})
    return out
