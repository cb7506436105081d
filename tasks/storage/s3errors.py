"""The errors of an S3-compatible store (:mod:`tasks.storage.s3`), below both it and the conditional-write
probe (:mod:`tasks.storage.s3fence`)."""

from __future__ import annotations

from botocore.exceptions import ClientError

from tasks.storage.errors import StorageUnavailable


class StoreError(StorageUnavailable):
    """The store refused a request or did not answer; the message names endpoint, bucket, key and code."""

    def __init__(self, message: str, code: str = "", where: str = ""):
        super().__init__(message)
        self.code, self.where = code, where


class PreconditionFailed(RuntimeError):
    """A conditional write's condition did not hold: another writer changed (or created) the key."""


def precondition_failed(exc: ClientError) -> bool:
    error = exc.response.get("Error", {})
    status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return error.get("Code") in ("PreconditionFailed", "412") or status == 412
