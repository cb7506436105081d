"""The error for a raw zone or data root that cannot be reached."""


class StorageUnavailable(RuntimeError):
    """A raw zone or data root that cannot be reached; tasks/faults.py makes it one line, exit 30.
    ``where`` names the store alone (``endpoint http://rgw:7480, bucket lake``), when known."""

    where: str = ""
