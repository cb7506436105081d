"""How two partitions' rules compare: the settings that differ, and whether newer code or settings built one."""

from __future__ import annotations

import datetime as dt
import hashlib
import json

OFFSETS = "utc_offsets"  # {zone: {days from the date ("0", "-1"): tasks.calendar.day_offset}}: time-zone data


def same_settings(theirs: dict, ours: dict) -> bool:
    """Whether two partitions' rules set every setting alike (a dict's entries where both have them); the time
    zones' offsets are input, not a setting."""
    theirs, ours = _settings(theirs), _settings(ours)
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


def settings_at(dataset: str, rules: dict) -> float:
    """When this host's settings that ``rules`` read (a partition's, or :meth:`settings_read`'s) last changed:
    the newest time it first saw one of them as it is now (:mod:`tasks.settings_seen`), so an edit of other
    settings leaves it as it was. Rules of no setting (the version alone): the config files' modification
    time, with the hotels list's for hotels. Kept per data root: another root's settings are another's."""
    from tasks import reference, settings, settings_seen

    extra = (reference.hotels_file(),) if "timezones" in rules else ()
    group = f"{settings.data_uri()} {dataset}"
    entries = setting_entries(group, rules)
    if not entries:
        return settings.settings_changed_at(extra)
    return settings_seen.changed_at(entries, lambda: settings.settings_changed_at(extra), group)


def fingerprint(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:32]


def rules_seen(node) -> tuple[str, float]:
    """(the fingerprint of ``node``'s rules, :func:`settings_at` them): their settings recorded as seen here."""
    read = getattr(node, "settings_read", node.rules)  # every setting its rules may read, cutting or not
    return node.rules_fingerprint(), settings_at(node.dataset, read())


def setting_entries(group: str, rules: dict) -> dict[str, str]:
    """Each setting of ``rules`` as ``{"<group> <name>[<key>]": value}``: not the version (a newer one is never
    replaced), the time zones' offsets (input), nor a setting that is not set (None: a hotel not in the list)."""
    out = {}
    for name, value in _settings(rules).items():
        if name == "version":
            continue
        items = value.items() if isinstance(value, dict) else [(None, value)]
        for key, v in items:
            if v is not None:
                out[f"{group} {name}" + (f"[{key}]" if key is not None else "")] = json.dumps(v, default=str)
    return out


def iso_time(text) -> float:
    try:
        return dt.datetime.fromisoformat(text).timestamp()
    except (TypeError, ValueError):
        return 0.0


MAKE_NEWEST = "touch its luigi.cfg and delete settings_seen.json from its cache_dir"  # the settings as they are
TIE_FIX = f"make the settings to keep the newest (on that host: {MAKE_NEWEST}), then rerun"
ROLL_BACK = f"change this host's settings again (or, to keep them as they are, {MAKE_NEWEST}) and rerun"


def _settings(rules: dict) -> dict:
    return {k: v for k, v in rules.items() if k != OFFSETS}


def rules_reason(old: dict, new: dict, date: dt.date | None = None) -> str:
    """``rules changed: ...`` (:func:`diff_rules`), or :func:`offsets_changed` when only the offsets differ."""
    if _settings(old) == _settings(new):
        said = offsets_changed(old.get(OFFSETS), new.get(OFFSETS), date)
        if said:
            return said
    return "rules changed: " + diff_rules(old, new, date)


def offsets_changed(old, new, date: dt.date | None = None) -> str:
    """``time zone America/Vancouver's offset on 2026-11-05 changed -08:00 -> -07:00 (time-zone data)`` for
    the days in both ``old`` and ``new`` whose offsets differ; ''."""
    said = []
    for zone in sorted(old.keys() & new.keys()) if isinstance(old, dict) and isinstance(new, dict) else []:
        was, now = old[zone], new[zone]
        if isinstance(was, dict) and isinstance(now, dict):
            days = [(d, was[d], now[d]) for d in sorted(was.keys() & now.keys(), key=_day) if was[d] != now[d]]
            if days:
                text = ", ".join(f"on {_day_name(d, date)} changed {a} -> {b}" for d, a, b in days)
                said.append(f"time zone {zone}'s offset {text}")
    return f"{'; '.join(said)} (time-zone data)" if said else ""


def _day(label: str) -> int:
    try:
        return int(label)
    except ValueError:
        return 0


def _day_name(label: str, date: dt.date | None) -> str:
    """The day ``label`` (days from ``date``) as a date; without one, "the date" or "the date -1"."""
    if date is None:
        return "the date" if _day(label) == 0 else f"the date {_day(label):+d}"
    return (date + dt.timedelta(days=_day(label))).isoformat()


def diff_rules(old: dict, new: dict, date: dt.date | None = None) -> str:
    """Each setting that differs, ``name old -> new`` (``name now new``, ``name no longer old``, a table's
    ``name[key] old -> new``, or :func:`offsets_changed`)."""
    changed = []
    for k in sorted(set(old) | set(new)):
        was, now = old.get(k), new.get(k)
        if was == now:
            continue
        if k == OFFSETS:  # a zone only one side has: the timezones that differ say why
            text = offsets_changed(was, now, date)
            if not text and was is None:  # built before partitions recorded them
                text = "the time zones' UTC offsets now recorded"
            changed += [text] if text else []
            continue
        if isinstance(was, dict) and isinstance(now, dict):
            changed += [
                f"{k}[{e}] {_shown(was.get(e))} -> {_shown(now.get(e))}"
                for e in sorted(set(was) | set(now))
                if was.get(e) != now.get(e)
            ]
        elif k == "start_date" and (was is None or now is None):  # recorded only where it cuts a window
            changed.append(
                f"its window now cut by start_date {now!r}"
                if was is None
                else f"its window no longer cut by start_date {was!r}"
            )
        elif was is None:
            changed.append(f"{k} now {now!r}")
        elif now is None:
            changed.append(f"{k} no longer {was!r}")
        else:
            changed.append(f"{k} {was!r} -> {now!r}")
    return ", ".join(changed) or "fingerprint differs"


def _shown(value) -> str:
    """An entry of a table of settings in a reason; ``(none)`` where absent."""
    return "(none)" if value is None else repr(value)
