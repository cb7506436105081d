"""Rules of the data contract (docs/raw-zone.md) that more than one layer applies: the raw zone's
sources, the store file names, and how a name or row with control characters is shown. Pure: no I/O."""

from __future__ import annotations

import re
from collections.abc import Callable

STORE_FILE_PATTERN = re.compile(r"[A-Z0-9][A-Z0-9_-]{0,31}\.csv")  # <store_id>.csv, matched whole
CONTROL_CHARACTER = r"[\x00-\x1f\x7f]"  # U+0000..U+001F and U+007F: the contract forbids them in any field


def is_store_file(name: str) -> bool:
    """``<store_id>.csv`` with a store id of the contract's pattern: the only QSR files ever read."""
    return STORE_FILE_PATTERN.fullmatch(name) is not None


# {source: (the file a raw folder has arrived with, in words; whether a name is one)}: until then it waits
ARRIVES_WITH: dict[str, tuple[str, Callable[[str], bool]]] = {
    "qsr_pos": ("any <store_id>.csv", is_store_file),
    "hotel_bookings": ("any <hotel_id>.csv", is_store_file),
    "ads": ("its ads.csv", "ads.csv".__eq__),
}


# {source: what an id is}: a folder has arrived once it holds the file of every listed id that sent one before
EVERY_LISTED: dict[str, str] = {"hotel_bookings": "hotel"}


def arrives_with(source: str, name: str) -> bool:
    """Whether file ``name`` makes a folder of ``source`` arrived (of a source not listed: any file)."""
    rule = ARRIVES_WITH.get(source)
    return rule is None or rule[1](name)


def awaited_file(source: str) -> str:
    """The file a folder of ``source`` arrives with, in words: ``any <store_id>.csv``, ``its ads.csv``."""
    return ARRIVES_WITH.get(source, ("any file",))[0]


def escape_control(text: str) -> str:
    """``text`` with each control character spelled ``\\xNN`` (quarantined rows, names shown)."""
    return re.sub(CONTROL_CHARACTER, lambda m: f"\\x{ord(m.group()):02x}", text)


def printable(name: str) -> str:
    """A raw zone name as Daybreak shows it: a control character or a byte that is not UTF-8 spelled
    ``\\xNN``, so a name can neither drive the terminal nor pass for another one."""
    if name.isprintable():
        return name
    return escape_control(name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace"))
