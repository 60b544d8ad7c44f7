"""Pure transforms: frames in, frames out. No I/O beyond what callers hand in."""
