"""What lies under the datasets' folders but is no partition of theirs: left-over hotels and stores, strays."""

from __future__ import annotations

import shlex

from tasks import catalogue, settings
from tasks.contract import is_store_file, printable
from tasks.freshness.engine import Engine
from tasks.storage.layout import parse_partition_name
from tasks.storage.partitions import open_store
from tasks.views.rows import DATA_ROOT, LEFT_OVER, NOT_READ, DayStatus

STORES = catalogue.STORE_DAILY_SALES.name
HOTEL_FOLDER, STORE_FOLDER = "hotel_id=", "store_id="  # a hotel's, a store's partition folder: hotel_id=H1


def data_root_rows(names: list[str], engine: Engine | None = None) -> list[DayStatus]:
    """The rows of what lies under the folders of the datasets ``names`` but is no partition of theirs:
    left-over partitions (still read by a glob) and strays."""
    from tasks.reference import hotels, hotels_source
    from tasks.store_marts import REGISTRY, read_registry, staged_stores

    listed = {f"{HOTEL_FOLDER}{h}" for h in hotels()}
    strays, left = [], {HOTEL_FOLDER: [], STORE_FOLDER: []}
    for name in names:
        spec = catalogue.BY_NAME[name]
        stores = {f"{STORE_FOLDER}{s}" for s in [*read_registry(), *staged_stores(engine)]} if name == STORES else ()
        levels = {
            "date": [_is_date],
            "date x hotel": [_is_date, listed.__contains__],
            "hotel": [listed.__contains__],
            "store": [stores.__contains__],
        }
        if spec.partition not in levels:
            continue
        depth, folder = len(levels[spec.partition]), STORE_FOLDER if spec.partition == "store" else HOTEL_FOLDER
        for key in open_store(settings.data_uri(), spec.path).strays(levels[spec.partition]):
            parts = key[len(spec.path) + 1 :].split("/")
            named = spec.key_param and len(parts) >= depth and parts[depth - 1].startswith(folder)
            kept = parts[depth - 1].removeprefix(folder) if named else ""
            if kept and is_store_file(f"{kept}.csv") and (depth == 1 or _is_date(parts[0])):
                left[folder].append((spec.path, "/".join([spec.path, *parts[:depth]]) + "/", kept))
            else:
                strays.append(key)
    out = []
    unregistered = f"not registered (_state/{REGISTRY})"
    for folder, gone_from in ((HOTEL_FOLDER, f"not in {hotels_source()}"), (STORE_FOLDER, unregistered)):
        if left[folder]:
            out.append(_left_over_row(left[folder], folder, gone_from))
    if strays:
        n = len(strays)
        reason = f"{n} {'entry' if n == 1 else 'entries'} under the datasets' folders that no partition is (never read)"
        out.append(DayStatus(DATA_ROOT, None, NOT_READ, reason, not_read=tuple(printable(k) for k in sorted(strays))))
    return out


def _left_over_row(left: list[tuple[str, str, str]], folder: str, gone_from: str) -> DayStatus:
    """The row of the partitions (dataset path, folder, key) of hotels, or stores, ``gone_from`` a list."""
    folders = list(dict.fromkeys(f for _, f, _ in left))  # a bucket lists each object of one
    gone = sorted({key for *_, key in left})
    one, hotel = len(gone) == 1, folder == HOTEL_FOLDER
    which = f"{'hotel' if hotel else 'store'}{'' if one else 's'} {', '.join(gone)}"
    back = f"put {'it' if one else 'them'} back"
    names = ", ".join(gone)
    mistake = (
        f"If {names} {'is' if one else 'are'} off the list by mistake, {back}"
        if hotel
        else f"If {names} {'is a store' if one else 'are stores'}, AllStores registers {'it' if one else 'them'} once "
        f"{'its' if one else 'their'} files are in the raw zone"
    )
    reason = (
        f"left over: {len(folders)} partition{'' if len(folders) == 1 else 's'} of {which}, {gone_from}: readers "
        f"of the datasets' files still get their rows, and no run removes them. {mistake}; else delete them: "
        f"{_remove_left_over(left, folder)}"
    )
    return DayStatus(DATA_ROOT, None, LEFT_OVER, reason, not_read=tuple(printable(f) for f in folders))


def _is_date(name: str) -> bool:
    return parse_partition_name(name) is not None


def _remove_left_over(left: list[tuple[str, str, str]], key_folder: str = HOTEL_FOLDER) -> str:
    """The command that deletes the left-over partitions (dataset path, folder, hotel or store)."""
    commands = []
    for path, folder, hotel in dict.fromkeys(left):
        dated = folder.rstrip("/").count("/") > path.count("/") + 1
        top = open_store(settings.data_uri(), path if dated else folder.rstrip("/")).uri(None)
        commands.append(remove_command(top, f"{key_folder}{hotel}" if dated else ""))
    commands = list(dict.fromkeys(commands))
    if all(c.startswith("rm -r ") for c in commands):  # a local data root: one command
        return "rm -r " + " ".join(c.removeprefix("rm -r ") for c in commands)
    return " && ".join(commands)


def remove_command(folder: str, under: str = "") -> str:
    """The shell command that deletes a partition's folder; with ``under``, those of that name one level below."""
    if folder.startswith("s3://"):
        endpoint = settings.s3().endpoint_url
        return (
            "aws s3 rm --recursive "
            + (f"--endpoint-url {shlex.quote(endpoint)} " if endpoint else "")
            + shlex.quote(folder + "/")
            + (f" --exclude '*' --include {shlex.quote(f'*/{under}/*')}" if under else "")
        )
    return "rm -r " + shlex.quote(folder) + (f"/*/{shlex.quote(under)}" if under else "")
