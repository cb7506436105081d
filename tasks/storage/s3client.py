"""This process's boto3 client of each endpoint, region and credentials (the only module that makes one), and
its :class:`s3get.Signer` of each bucket: one per process (a forked worker makes its own: connections are not
shared)."""

from __future__ import annotations

import os
import threading
from urllib.parse import urlsplit

import boto3
import botocore.session
from botocore.config import Config
from botocore.handlers import add_expect_header

from tasks.storage import s3get, s3gone

_clients: dict[tuple, object] = {}
_sessions: dict[tuple, object] = {}  # the botocore session of each client: its credentials, refreshed by it
_signers: dict[tuple, s3get.Signer] = {}
_lock = threading.Lock()


def _session(key: tuple):
    """The botocore session of a client (``key``: :func:`_client_key`): its credentials and settings."""
    with _lock:
        if key not in _sessions:
            core = _sessions[key] = botocore.session.get_session()  # timestamps not by dateutil: CPU
            core.get_component("response_parser_factory").set_parser_defaults(timestamp_parser=s3get.read_timestamp)
        return _sessions[key]


def client(endpoint: str | None, region: str):
    """One client per process and endpoint (a forked worker makes its own: connections are not shared)."""
    key = _client_key(endpoint, region)
    core = _session(key)
    with _lock:
        if key not in _clients:
            config = Config(
                region_name=region,
                signature_version="s3v4",
                s3={"addressing_style": "path" if endpoint else "auto"},
                retries={"max_attempts": ATTEMPTS, "mode": "standard"},
                connect_timeout=s3get.CONNECT_S,
                read_timeout=timeout(),  # of each read of an answer, not of a whole object
                # radosgw refuses aws-chunked bodies with trailing checksums (botocore's default over HTTPS)
                request_checksum_calculation="when_required",
                response_checksum_validation="when_required",
                max_pool_connections=32,
            )
            client = boto3.session.Session(botocore_session=core).client("s3", endpoint_url=endpoint, config=config)
            # no "Expect: 100-continue": a round trip more per PUT, for bodies that are small
            client.meta.events.unregister("before-call.s3", add_expect_header)
            if endpoint:  # an attempt under way when the store was given up is its last (on AWS: its bucket's)
                client.meta.events.register("before-send.s3", s3gone.before_send(endpoint))
            _clients[key] = client
        return _clients[key]


ATTEMPTS = 3  # of a request botocore sends; then a store that did not answer is given up (tasks/storage/s3gone.py)


def timeout() -> float:
    from tasks import settings

    return float(settings.s3().timeout)


def _client_key(endpoint: str | None, region: str) -> tuple:
    credentials = (os.environ.get("AWS_ACCESS_KEY_ID"), os.environ.get("AWS_SECRET_ACCESS_KEY"))
    return (os.getpid(), endpoint, region, credentials)


def signer(endpoint: str | None, region: str, bucket: str) -> s3get.Signer:
    """This process's :class:`s3get.Signer` of ``bucket``; under an endpoint, path-style and without a client."""
    key = _client_key(endpoint, region)
    with _lock:
        signer = _signers.get((key, bucket))
    if signer is None:
        core = _session(key)
        if endpoint:
            url = urlsplit(endpoint)
            verify = core.get_config_variable("ca_bundle") or os.environ.get("REQUESTS_CA_BUNDLE", True)
            origin, base = f"{url.scheme}://{url.netloc}", f"{url.path.rstrip('/')}/{bucket}/"
            signer = s3get.Signer(origin, base, region, core.get_credentials(), verify, timeout())
            signer.store = endpoint  # given up (tasks/storage/s3gone.py): its next attempt is not sent
        else:
            signer = s3get.Signer.of_client(client(endpoint, region), core.get_credentials(), bucket, timeout())
        with _lock:
            signer = _signers.setdefault((key, bucket), signer)
    return signer
