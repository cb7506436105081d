"""How two partitions' rules compare: the settings that differ, and whether newer code or newer settings
built one (docs/scale-out.md, "A rollout"). Pure, but for the settings files' times."""

from __future__ import annotations

import datetime as dt


def same_settings(theirs: dict, ours: dict) -> bool:
    """Whether two partitions' rules set every setting alike; a dict's entries are compared where both have
    them (a hotel's timezone is in the rules of the dates that read its extracts, and only of those)."""
    if theirs.keys() != ours.keys():
        return False
    for key, a in theirs.items():
        b = ours[key]
        if isinstance(a, dict) and isinstance(b, dict):
            if any(a[k] != b[k] for k in a.keys() & b.keys()):
                return False
        elif a != b:
            return False
    return True


def newer_version(theirs, ours) -> bool:
    """Whether transform version ``theirs`` (``stg_qsr_pos/7``) is newer than ``ours`` (``stg_qsr_pos/6``)."""
    (name_a, a), (name_b, b) = str(theirs).rpartition("/")[::2], str(ours).rpartition("/")[::2]
    return name_a == name_b and a.isdigit() and b.isdigit() and int(a) > int(b)


def built_by_newer(theirs, ours) -> str:
    """The reason of a partition that newer code built, which this host's runs never replace."""
    return f"built by a newer version {theirs} than this host's {ours}: upgrade this host; a run does not replace it"


def settings_at(hotels: bool = False) -> float:
    """:func:`tasks.settings.settings_changed_at`, the hotels list included for a dataset whose rules hold
    the hotels' time zones (``hotels``)."""
    from tasks import reference, settings

    return settings.settings_changed_at((reference.hotels_file(),) if hotels else ())


def iso_time(text) -> float:
    try:
        return dt.datetime.fromisoformat(text).timestamp()
    except (TypeError, ValueError):
        return 0.0


ROLL_BACK = "change this host's settings again (or touch its luigi.cfg) and rerun"


def diff_rules(old: dict, new: dict) -> str:
    """Each setting that differs, ``name old -> new``; one that one side does not record, ``name now new`` or
    ``name no longer old`` (a window records start_date only where it cuts it, and a rules dict from an older
    version may lack a setting: its value there is not known, not none); of a table of settings (hotels'
    timezones), only its entries that differ, ``name[key] old -> new``."""
    changed = []
    for k in sorted(set(old) | set(new)):
        was, now = old.get(k), new.get(k)
        if was == now:
            continue
        if isinstance(was, dict) and isinstance(now, dict):
            changed += [
                f"{k}[{e}] {_shown(was.get(e))} -> {_shown(now.get(e))}"
                for e in sorted(set(was) | set(now))
                if was.get(e) != now.get(e)
            ]
        elif was is None:
            changed.append(f"{k} now {now!r}")
        elif now is None:
            changed.append(f"{k} no longer {was!r}")
        else:
            changed.append(f"{k} {was!r} -> {now!r}")
    return ", ".join(changed) or "fingerprint differs"


def _shown(value) -> str:
    """An entry of a table of settings in a reason; ``(none)`` where the settings do not have it (a hotel not
    in the list has no timezone)."""
    return "(none)" if value is None else repr(value)
