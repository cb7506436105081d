"""Previews: build what a backfill would change into a shadow root under ``_state/preview/<id>/``, show
the difference, then publish or discard it (docs/backfills.md, "Preview, then publish")."""

from tasks.preview.build import make
from tasks.preview.publish import discard, in_production, listing, open_for, open_records, problems, publish, sweep
from tasks.preview.records import PUBLISH_LOCK, PreviewError, folder_of, previews_root, read_record
from tasks.preview.render import render, render_listing, to_json

__all__ = [
    "PUBLISH_LOCK", "PreviewError", "discard", "folder_of", "in_production", "listing", "make",
    "open_for", "open_records", "previews_root", "problems", "publish", "read_record", "render", "render_listing",
    "sweep", "to_json",
]  # fmt: skip
