"""hotel_booking_state's chain, beside its tasks in :mod:`tasks.hotels`: the bookings finished on each
date (``_finished.arrow``), the state before a day's events, and the versions the chain's readers depend on."""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

from tasks import settings
from tasks.storage.partitions import PartitionStore

if TYPE_CHECKING:
    from tasks.base import PartitionedTask


# a hotel_booking_state partition's bookings finished that day (Arrow IPC); "_" keeps it out of a reader's
# dataset (pyarrow, Spark and Hive skip such names)
FINISHED = "_finished.arrow"


def read_finished(store: PartitionStore, date: dt.date):
    """The rows that left the open state on ``date`` (hotel_booking_state's ``_finished.arrow``)."""
    import pyarrow as pa

    try:
        data = store.read_file(date, FINISHED)
    except FileNotFoundError:
        raise FileNotFoundError(
            f"{store.uri(date)}/{FINISHED}: the finished bookings of hotel_booking_state {date} are missing; "
            "rebuild that date"
        ) from None
    return pa.ipc.open_file(pa.BufferReader(data)).read_all()


def pa_concat(tables: list):
    import pyarrow as pa

    from tasks.transforms.hotels import STATE_SCHEMA

    return pa.concat_tables([t.select(STATE_SCHEMA.names).cast(STATE_SCHEMA) for t in tables])


def before_events(link: PartitionedTask, events, hotel: str | None = None):
    """The booking state before ``events`` (of the day after ``link``): ``link``'s open bookings and the
    finished rows of the bookings the events reopen, newest first."""
    import pyarrow.compute as pc

    from tasks.transforms.hotels import latest_per_booking, reopened_keys

    store = link.store()
    state = store.read_table(link.date)
    if hotel is not None:
        state = state.filter(pc.equal(state["hotel_id"], hotel))
    wanted = reopened_keys(state, events)
    if wanted.num_rows == 0:
        return state
    found, missing = [], set(_keys(wanted))
    day, start = link.date, settings.daybreak().start_date
    while missing and day >= start:
        rows = read_finished(store, day)
        key = pc.binary_join_element_wise(rows["hotel_id"], rows["booking_id"], "\x00")
        hit = rows.filter(pc.is_in(key, pa_strings(f"{h}\x00{b}" for h, b in missing)))
        if hit.num_rows:
            found.append(hit)
            missing -= set(_keys(hit))
        day -= dt.timedelta(days=1)
    if not found:
        return state
    # a booking finished twice: latest_per_booking keeps the latest of what was found
    return latest_per_booking(pa_concat([state, *found]))


def _keys(rows) -> list[tuple[str, str]]:
    return list(zip(rows["hotel_id"].to_pylist(), rows["booking_id"].to_pylist(), strict=True))


def pa_strings(values):
    import pyarrow as pa

    return pa.array(list(values), pa.string())


def chain_versions(table, finished, previous_stats: dict) -> dict:
    """The versions a state partition's readers depend on: per hotel, of the finished rows (running), and
    ``chain_version`` over all."""
    import hashlib
    import json

    from tasks.transforms.hotels import slice_digests

    open_versions, done = slice_digests(table, "hotel_id"), slice_digests(finished, "hotel_id")
    earlier = previous_stats.get("finished_versions", {})
    running = {
        h: hashlib.sha256(f"{earlier.get(h, '')}:{done.get(h, '')}".encode()).hexdigest() if h in done else earlier[h]
        for h in sorted(set(earlier) | set(done))
    }
    hotels_ = sorted(set(open_versions) | set(running))
    versions = {
        h: hashlib.sha256(f"{open_versions.get(h, 'none')}:{running.get(h, 'none')}".encode()).hexdigest()
        for h in hotels_
    }
    chain = hashlib.sha256(json.dumps(versions, sort_keys=True).encode()).hexdigest()
    return {"hotel_versions": versions, "finished_versions": running, "chain_version": chain}
