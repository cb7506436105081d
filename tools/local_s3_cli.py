"""``bin/local-s3``: a local S3-compatible server (tools/local_s3.py) for trying Daybreak's bucket set-up on one
machine (docs/scale-out.md). Not for production: objects live in memory, and there is one user.

    bin/local-s3 start [--port 7480] [--bucket NAME ...] [--folder .local-s3]
        starts radosgw on 127.0.0.1 in the background, makes the buckets, and prints the shell lines that
        export its endpoint (S3_ENDPOINT) and credentials (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY)
    bin/local-s3 put FOLDER s3://BUCKET/PREFIX [--folder .local-s3]
        uploads every file below FOLDER, one plain PUT each (so an object's ETag is the MD5 of its bytes)
    bin/local-s3 stop [--folder .local-s3]
        ends the server; its objects are gone

A mistake (radosgw not installed, the port taken, a bucket name S3 refuses, no server started) is one line
on stderr and exit 2.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shlex
import signal
import socket
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tools.local_s3 import INSTALL, Radosgw, missing

STATE = "local-s3.json"  # in the folder: the endpoint, the keys and the daemons' process groups


class Refused(Exception):
    """A usage error: one line, exit 2."""


# S3's rules for a bucket's name: 3 to 63 lowercase letters, digits, dots and hyphens, first and last a letter or
# a digit (the server refuses more: an IP address, two dots in a row)
_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")


def bucket_problem(name: str) -> str | None:
    """Why S3 refuses ``name`` as a bucket's name, by its rules; None when they allow it."""
    if _BUCKET.fullmatch(name):
        return None
    if not 3 <= len(name) <= 63:
        return f"bucket name {name!r} has {len(name)} characters: S3 takes 3 to 63"
    return (
        f"bucket name {name!r}: S3 takes lowercase letters, digits, dots and hyphens only, "
        "beginning and ending with a letter or a digit"
    )


def port_taken(port: int) -> bool:
    """Whether a socket listens on (or holds) ``port`` of 127.0.0.1. Connections of an ended server waiting
    out their TIME_WAIT do not count: radosgw binds over them, as this probe does (SO_REUSEADDR)."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def start(folder: Path, port: int, buckets: list[str]) -> None:
    if problem := next(filter(None, map(bucket_problem, buckets)), None):
        raise Refused(problem)
    if gone := missing():
        raise Refused(f"{', '.join(gone)} not installed: {INSTALL} (as root, or with sudo)")
    if (folder / STATE).exists():
        raise Refused(f"a server is already started from {folder}: bin/local-s3 stop --folder {folder} first")
    if port_taken(port):
        raise Refused(f"port {port} on 127.0.0.1 is taken: give another with --port")
    from botocore.exceptions import ClientError

    server = Radosgw(folder, port=port, detach=True).start()
    try:
        for bucket in buckets:
            try:
                server.make_bucket(bucket)
            except ClientError as exc:
                error = exc.response.get("Error", {})
                raise Refused(
                    f"bucket {bucket}: the server refused it ({error.get('Code')}"
                    f"{': ' + error['Message'] if error.get('Message') else ''}); no server left running"
                ) from None
    except BaseException:
        server.stop()
        raise
    state = {
        "endpoint": server.endpoint_url,
        "access_key": server.access_key,
        "secret_key": server.secret_key,
        "region": server.region,
        "groups": [proc.pid for proc in server.procs.values()],  # each daemon leads its own process group
    }
    (folder / STATE).write_text(json.dumps(state, indent=1))
    print(f"export S3_ENDPOINT={server.endpoint_url}")
    print(f"export AWS_ACCESS_KEY_ID={server.access_key}")
    print(f"export AWS_SECRET_ACCESS_KEY={server.secret_key}")
    made = f", buckets {', '.join(buckets)}" if buckets else ""
    stop = f"bin/local-s3 stop --folder {shlex.quote(str(folder))}"
    print(
        f"local-s3: radosgw on {server.endpoint_url}{made} (files in {folder}); stop it with: {stop}", file=sys.stderr
    )


def _state(folder: Path) -> dict:
    try:
        return json.loads((folder / STATE).read_text())
    except FileNotFoundError:
        raise Refused(f"no server started from {folder} (bin/local-s3 start)") from None


def put(folder: Path, source: Path, uri: str) -> None:
    import boto3
    from botocore.config import Config

    if not uri.startswith("s3://") or not uri[5:].split("/")[0]:
        raise Refused(f"{uri}: expected s3://BUCKET/PREFIX")
    if not source.is_dir():
        raise Refused(f"{source}: not a folder")
    state = _state(folder)
    bucket, _, prefix = uri[5:].partition("/")
    prefix = prefix.strip("/") + "/" if prefix.strip("/") else ""
    client = boto3.client(
        "s3",
        endpoint_url=state["endpoint"],
        aws_access_key_id=state["access_key"],
        aws_secret_access_key=state["secret_key"],
        region_name=state["region"],
        config=Config(s3={"addressing_style": "path"}, request_checksum_calculation="when_required"),
    )
    files = sorted(p for p in source.rglob("*") if p.is_file())

    def one(path: Path) -> None:
        client.put_object(Bucket=bucket, Key=prefix + path.relative_to(source).as_posix(), Body=path.read_bytes())

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(one, files))
    print(f"local-s3: {len(files)} files of {source} put into s3://{bucket}/{prefix}", file=sys.stderr)


def stop(folder: Path) -> None:
    state = _state(folder)
    for group in state["groups"]:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, signal.SIGKILL)
    (folder / STATE).unlink()
    print(f"local-s3: stopped the server of {folder}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="bin/local-s3", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("start", "put", "stop"):
        p = sub.add_parser(name)
        p.add_argument("--folder", type=Path, default=Path(".local-s3"), help="the server's files (.local-s3)")
        if name == "start":
            p.add_argument("--port", type=int, default=7480, help="radosgw's port on 127.0.0.1 (7480)")
            p.add_argument("--bucket", action="append", default=[], help="a bucket to make (repeat for more)")
        if name == "put":
            p.add_argument("source", type=Path, help="a folder: every file below it is put")
            p.add_argument("uri", help="s3://BUCKET/PREFIX")
    args = parser.parse_args(argv)
    folder = args.folder.resolve()
    try:
        if args.command == "start":
            start(folder, args.port, args.bucket)
        elif args.command == "put":
            put(folder, args.source, args.uri)
        else:
            stop(folder)
    except Refused as exc:
        print(f"local-s3: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
