"""A data root in an S3-compatible bucket, as tasks/storage/partitions.py opens it (``s3://BUCKET/PREFIX``)."""

from tasks.storage.s3docs import S3Root, check, read_document, state_dir, update_document
from tasks.storage.s3shadow import S3ShadowStore
from tasks.storage.s3store import S3PartitionStore

__all__ = ["S3PartitionStore", "S3Root", "S3ShadowStore", "check", "read_document", "state_dir", "update_document"]
