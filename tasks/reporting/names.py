"""How a run's messages name what it built: a partition as the user names it, runs of dates, a capped list."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict

DETAIL_LINES = 8  # per kind (failed, waiting, not run), then "... N more"


def when(started: str) -> str:
    """``2026-12-07 06:00 .. 06:02 UTC``: from the run's first check to now (a day named again when it changed)."""
    end = dt.datetime.now(dt.UTC)
    start = dt.datetime.fromisoformat(started) if started else end
    until = f"{end:%H:%M}" if end.date() == start.date() else f"{end:%Y-%m-%d %H:%M}"
    return f"{start:%Y-%m-%d %H:%M} .. {until} UTC"


def capped(prefix: str, items: list[str], note: str = "") -> list[str]:
    shown = [prefix + item for item in items[:DETAIL_LINES]]
    if len(items) > DETAIL_LINES:
        shown.append(f"{prefix}... and {len(items) - DETAIL_LINES} more")
    if shown and note:
        shown[0] += f" {note}"
    return shown


def first_line(error: str, width: int = 240) -> str:
    """An error's first line cut at a word boundary before ``width``, a path the cut would fall in kept whole."""
    return cut_at_word((error.strip().splitlines() or ["(no message)"])[0], width, keep_path=True)


def cut_at_word(text: str, width: int, keep_path: bool = False) -> str:
    """``text``, whitespace collapsed, cut at a word boundary before ``width`` with `` ...`` (not
    ``textwrap.shorten``: it drops a long first word); ``keep_path``: a path the cut falls in kept whole."""
    text = " ".join(text.split())
    if len(text) <= width:
        return text
    cut = text.rfind(" ", 0, width - 3)
    end = text.find(" ", cut + 1) % (len(text) + 1)  # the end of the word the cut falls in (-1: the text's)
    if keep_path and "/" in text[cut + 1 : end]:
        if end == len(text):
            return text
        cut = end
    return (text[:cut] if cut > 0 else text[: width - 4]) + " ..."


def label(task) -> str:
    """A partition as the user names it: ``HotelPickup 2026-09-12 H1``, never Luigi's task id."""
    keys = (getattr(task, "key", None), getattr(task, "hotel", None), getattr(task, "store_id", None))
    return " ".join(str(x) for x in (task.task_family, *keys) if x is not None)


def key_of(task):
    """A partition's key as a summary shows it: its date, or the store or hotel of a per-store or per-hotel one."""
    if task.key is not None:
        return task.key
    return getattr(task, "store_id", None) or getattr(task, "hotel", None)


def partition_name(family: str, key) -> str:
    return f"{family} {key}" if key is not None else family


def partition_names(partitions: list[tuple[str, object]]) -> str:
    by_family: dict[str, list] = defaultdict(list)
    for family, key in partitions:
        by_family[family].append(key)
    return "; ".join(f"{family} {dates_span(keys)}".rstrip() for family, keys in by_family.items())


def dates_span(keys: list) -> str:
    """Keys in short: ``2026-09-09 .. 2026-09-10, 2026-09-24 (3 dates)``, or keys that are not dates
    listed; '' unpartitioned."""
    dates = sorted({k for k in keys if isinstance(k, dt.date)})
    if not dates:
        named = sorted({str(k) for k in keys if k is not None})
        return ", ".join(named) if len(named) <= 10 else f"{named[0]} .. {named[-1]} ({len(named)})"
    firsts = [d for i, d in enumerate(dates) if i == 0 or (d - dates[i - 1]).days > 1]
    lasts = [d for i, d in enumerate(dates) if i == len(dates) - 1 or (dates[i + 1] - d).days > 1]
    texts = [str(a) if a == b else f"{a} .. {b}" for a, b in zip(firsts, lasts, strict=True)]
    if len(texts) == 1:
        return texts[0]
    if len(texts) > 5:
        return f"{', '.join(texts[:3])} and {len(texts) - 3} more runs to {dates[-1]} ({len(dates)} dates)"
    return f"{', '.join(texts)} ({len(dates)} dates)"
