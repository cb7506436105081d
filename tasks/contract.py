"""Rules of the data contract (docs/raw-zone.md) that more than one layer applies: the raw zone's
sources, the store file names, and how a name or row with control characters is shown. Pure: no I/O."""

from __future__ import annotations

import re

STORE_FILE_PATTERN = re.compile(r"[A-Z0-9][A-Z0-9_-]{0,31}\.csv")  # <store_id>.csv, matched whole
# a source whose export is one file per folder: its folder arrives with that file (one made first is not there yet)
EXPORT_FILES = {"ads": "ads.csv"}
CONTROL_CHARACTER = r"[\x00-\x1f\x7f]"  # U+0000..U+001F and U+007F: the contract forbids them in any field


def is_store_file(name: str) -> bool:
    """``<store_id>.csv`` with a store id of the contract's pattern: the only QSR files ever read."""
    return STORE_FILE_PATTERN.fullmatch(name) is not None


def escape_control(text: str) -> str:
    """``text`` with each control character spelled ``\\xNN`` (quarantined rows, names shown)."""
    return re.sub(CONTROL_CHARACTER, lambda m: f"\\x{ord(m.group()):02x}", text)


def printable(name: str) -> str:
    """A raw zone name as Daybreak shows it: a control character or a byte that is not UTF-8 spelled
    ``\\xNN``, so a name can neither drive the terminal nor pass for another one."""
    if name.isprintable():
        return name
    return escape_control(name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace"))
