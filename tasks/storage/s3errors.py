"""The errors of an S3-compatible store (:mod:`tasks.storage.s3`), below both it and the conditional-write
probe (:mod:`tasks.storage.s3fence`)."""

from __future__ import annotations

import datetime as dt
import email.utils

from botocore.exceptions import ClientError

from tasks.storage.errors import StorageUnavailable


class StoreError(StorageUnavailable):
    """The store refused a request or did not answer; the message names endpoint, bucket, key and code."""

    def __init__(self, message: str, code: str = "", where: str = ""):
        super().__init__(message)
        self.code, self.where = code, where


class StoreNotAnswering(StoreError):
    """The store did not answer within ``seconds`` (``[s3] timeout``, or the time to connect), past the
    retries: given up for the rest of the run (:mod:`tasks.storage.s3gone`)."""

    def __init__(self, message: str, code: str, where: str, seconds: float):
        super().__init__(message, code, where)
        self.seconds = seconds


class PreconditionFailed(RuntimeError):
    """A conditional write's condition did not hold: another writer changed (or created) the key."""


def precondition_failed(exc: ClientError) -> bool:
    error = exc.response.get("Error", {})
    status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return error.get("Code") in ("PreconditionFailed", "412") or status == 412


def clock_skew(exc: ClientError) -> tuple[str, str]:
    """How far this host's clock is from the store's: ServerTime against RequestTime (AWS), else ``Date``."""
    from botocore.auth import get_current_datetime

    error = exc.response.get("Error", {})
    try:
        server = dt.datetime.fromisoformat(str(error["ServerTime"]).replace("Z", "+00:00"))
        local = dt.datetime.fromisoformat(str(error["RequestTime"]).replace("Z", "+00:00"))
    except (KeyError, ValueError):
        date = exc.response.get("ResponseMetadata", {}).get("HTTPHeaders", {}).get("date")
        if not date:
            return "this host's clock is too far off from the store's", ""
        server = email.utils.parsedate_to_datetime(date)
        local = get_current_datetime()
    if local.tzinfo is None:
        local = local.replace(tzinfo=dt.UTC)
    if server.tzinfo is None:
        server = server.replace(tzinfo=dt.UTC)
    minutes = (local - server).total_seconds() / 60
    side = "ahead of it; " if minutes > 0 else "behind it; "
    return f"this host's clock is off by {abs(minutes):.0f} minutes from the store's", side
