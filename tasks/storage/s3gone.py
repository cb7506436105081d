"""The object stores this run gave up on: a store that did not answer a request within ``[s3] timeout``,
past its retries, is not asked again by this process nor by any process forked from it (a shared mapping),
so the partitions left fail at once instead of each waiting out its timeouts (as the SFTP raw zone's server,
tasks/storage/sftp.py). A store that refuses connections is not given up here: it fails fast anyway."""

from __future__ import annotations

import json
import mmap
import multiprocessing
import time

from botocore.exceptions import BotoCoreError

from tasks.storage.s3errors import StoreNotAnswering

# Byte 0: 1 once a store was given up; then {store: why} as JSON, NUL-terminated.
_GONE = mmap.mmap(-1, 16384)
_LOCK = multiprocessing.get_context("fork").Lock()  # shared with the forked workers, as the mapping is
_WHY_MAX = 400  # characters of a reason kept


def _read() -> dict[str, list]:
    text = _GONE[1:].split(b"\0", 1)[0]
    return json.loads(text) if text else {}


def give_up(store: str, why: str, seconds: float) -> None:
    """Take ``store`` (an endpoint, or AWS and a bucket) for gone for the rest of the run: it did not answer
    within ``seconds``, ``why`` says what was asked."""
    with _LOCK:
        gone = _read()
        if store in gone:
            return
        gone[store] = [why[:_WHY_MAX], seconds]
        data = json.dumps(gone).encode()
        if len(data) < len(_GONE) - 1:  # else this one is not remembered: its own request still failed
            _GONE[1 : 2 + len(data)] = data + b"\0"
            _GONE[0] = 1


def known(store: str) -> tuple[str, float] | None:
    """(what it did not answer, within how many seconds) when this run gave up on ``store``, else None."""
    if not _GONE[0]:
        return None
    with _LOCK:
        found = _read().get(store)
    return None if found is None else (str(found[0]), float(found[1]))


def forget() -> None:
    """Take every store for alive again (a new run in the same process: tests)."""
    with _LOCK:
        _GONE[0:2] = b"\0\0"


def not_answered(store: str, where: str, asked: str, code: str, seconds: float) -> StoreNotAnswering:
    """Give ``store`` up: it did not answer ``asked`` (``GET s3://...``) within ``seconds``, past the
    retries; the error of that request (``where``: its endpoint and bucket, ``code``: the timeout's kind)."""
    give_up(store, f"{asked} at {time.strftime('%H:%M:%S')}", seconds)
    why = f"no answer within {seconds:g} s ({code}); given up for the rest of the run"
    return StoreNotAnswering(f"object store: {asked} failed ({where}): {why}", code, where, seconds)


def at_start(where: str, seconds: float) -> StoreNotAnswering:
    """The error of a store that did not answer a process's first request (its bucket's check)."""
    why = f"no answer within {seconds:g} s ([s3] timeout): is the store up, and is [s3] endpoint_url its address?"
    return StoreNotAnswering(f"object store: HEAD bucket failed ({where}): {why}", "NoAnswer", where, seconds)


def refusal(store: str, where: str, asked: str) -> StoreNotAnswering | None:
    """The error of ``asked``, not sent, when this run gave up on ``store``; else None."""
    gone = known(store)
    if gone is None:
        return None
    first, seconds = gone
    why = f"not tried again in this run: no answer within {seconds:g} s to {first}"
    return StoreNotAnswering(f"object store: {asked} failed ({where}): {why}", "NoAnswer", where, seconds)


class GivenUp(BotoCoreError):
    """A request botocore was about to send (again) to a store this run gave up on meanwhile."""

    fmt = "the store was given up meanwhile"


def before_send(store: str):
    """A ``before-send`` handler of a client of ``store``: its next attempt of a request is not sent once
    the store is given up (a request under way when it froze stops at its current attempt)."""

    def check(**_) -> None:
        if known(store) is not None:
            raise GivenUp()

    return check
