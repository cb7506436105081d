"""What a store or server that cannot be reached raises, whichever it is (a raw zone, a data root)."""


class StorageUnavailable(RuntimeError):
    """A raw zone or data root that cannot be reached (a server down, frozen, refusing this client; a
    bucket that does not answer): its message names it and why; tasks/faults.py makes it one line, exit 30.
    ``where`` names the store or server alone (``endpoint http://rgw:7480, bucket lake``), when known."""

    where: str = ""
