"""A real S3 server on 127.0.0.1 for the S3 tests: Ceph's RADOS Gateway, as tools/local_s3.py runs it (the same
server ``bin/local-s3`` starts for docs/scale-out.md). Its docstring shows a fixture."""

from tools.local_s3 import BINARIES, INSTALL, Radosgw, free_port, installed, missing, running

__all__ = ["BINARIES", "INSTALL", "Radosgw", "free_port", "installed", "missing", "running"]
