"""What the freshness engine asks of a partition (:class:`Node`) and answers (:class:`State`, :class:`Blocked`)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Hashable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from tasks.storage.partitions import PartitionStore
    from tasks.storage.rawzone import RawZone


class Node(Protocol):
    """What the engine needs of a partition. :class:`tasks.base.MaterializedTask` implements it."""

    task_id: str  # unique per partition (family and parameters)
    dataset: str

    @property
    def key(self) -> dt.date | None: ...  # the business date; None for an unpartitioned dataset
    def store(self) -> PartitionStore: ...
    def dataset_path(self) -> str: ...  # one store per dataset path (a hotel's pickups have their own)
    def zone(self) -> RawZone: ...
    def rules(self) -> dict: ...
    def rules_fingerprint(self) -> str: ...
    def rules_key(self) -> Hashable: ...  # nodes with the same rules_key have the same rules
    def raw_window(self) -> list[tuple[str, dt.date]]: ...  # required raw folders (source, date)
    def any_raw_window(self) -> list[tuple[str, dt.date]]: ...  # at least one required; each present read
    def optional_raw_window(self) -> list[tuple[str, dt.date]]: ...  # read when present
    def accepts_input(self, name: str) -> bool: ...  # by the file's name alone (the engine remembers it)

    input_names: str  # the names accepts_input takes, for the reason a file is refused

    def upstream(self) -> list[Node]: ...
    def before_start(self) -> str: ...  # why it is out of range, kept as built (ok when there), never rebuilt; ''

    reads_a_slice: bool  # upstream_version is one key's slice (a hotel's rows): plans say its readers "may go stale"

    def upstream_version(self, manifest: dict | None) -> str | None: ...
    def acceptance_settings(self) -> dict: ...  # settings that decide a build's failure, not its output


RAW_GONE = "raw folder gone"  # an ok partition's reason: kept as built


def raw_folders(node: Node) -> list[tuple[str, dt.date]]:
    """Every raw folder (source, date) the node may read: required, any-of and optional."""
    return [*node.raw_window(), *node.any_raw_window(), *node.optional_raw_window()]


@dataclass(frozen=True)
class State:
    state: str  # ok | stale | missing | newer (built by a newer transform version: never replaced here)
    reason: str = ""
    may_rebuild: bool = False  # not ok only because an upstream is: rebuilt only if what it reads changes
    cause: str = ""  # the root of a not-ok upstream chain: "staging/x 2026-09-11 (stale: ...)"

    @property
    def ok(self) -> bool:
        return self.state == "ok"


@dataclass(frozen=True)
class Blocked:
    """The missing raw folders (its own or its not-ok upstreams') and the first partition that waits for one."""

    missing: frozenset[tuple[str, dt.date]]
    root: Node | None
