"""Previews: build what a backfill would change into a shadow root, show the difference, then publish
it (write-audit-publish) or discard it. docs/backfills.md, "Preview, then publish".

A preview of ``DATASET`` over ``[start, stop)`` lives in ``<data_root>/_state/preview/<id>/``:

* ``preview.json``: the range, what was built, the production manifest each built partition would
  replace (its sha256, or null when there is none), the diff, and the state (open, published);
* the shadow root: the same layout as the data root (``staging/...``, ``quarantine/...``,
  ``_state/failures``...), holding only the partitions the preview built.

The builds are the tasks' own (Luigi, the one run template) inside :func:`tasks.storage.partitions.shadowed`:
every store of the production data root writes to the shadow and reads a partition from there when
the shadow holds it, from production otherwise. Production is never written by a preview.
Publishing hard-links each partition's files next to their production place and renames them in,
the manifest last (:meth:`tasks.storage.partitions.PartitionStore.copy_partition_from`), upstream datasets first.
"""

from tasks.preview.build import make
from tasks.preview.publish import discard, in_production, listing, open_for, open_records, problems, publish, sweep
from tasks.preview.records import PUBLISH_LOCK, PreviewError, folder_of, previews_root, read_record
from tasks.preview.render import render, render_listing, to_json

__all__ = [
    "PUBLISH_LOCK", "PreviewError", "discard", "folder_of", "in_production", "listing", "make",
    "open_for", "open_records", "previews_root", "problems", "publish", "read_record", "render", "render_listing",
    "sweep", "to_json",
]  # fmt: skip
