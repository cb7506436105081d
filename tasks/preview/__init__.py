"""Previews: build what a backfill would change into a shadow root, show the difference, then publish
it (write-audit-publish) or discard it (docs/backfills.md, "Preview, then publish").

A preview lives in ``<data_root>/_state/preview/<id>/``: ``preview.json`` (range, builds, the manifests
they would replace, the diff, the state) and a shadow root holding only the partitions it built. The
builds are the tasks' own, inside :func:`tasks.storage.partitions.shadowed`; production is never written
until :func:`publish` links each partition in, manifest last, upstream datasets first.
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
