"""Pipelined reads of an SFTP raw zone: several files' requests in flight on one connection (the
connection, retries and host keys are :mod:`tasks.storage.sftp`'s)."""

from __future__ import annotations

import stat

import paramiko

from tasks.storage.rawbackend import UNREADABLE, RawFileUnreadable

FILES_IN_FLIGHT = 4  # files whose requests are out at once
FILES_PER_CALL = 32  # files read by one call (retried together) ...
BYTES_PER_CALL = 4 << 20  # ... or about this many bytes
_CHUNK = 261120  # the most OpenSSH sends in one reply


class _Replies:
    """Where paramiko hands the replies to requests sent with it (as its own prefetch does)."""

    def __init__(self):
        self.got: dict[int, tuple[int, paramiko.Message]] = {}

    def _async_response(self, kind: int, msg: paramiko.Message, num: int) -> None:
        self.got[num] = (kind, msg)


def read_pipelined(sftp: paramiko.SFTPClient, paths: list[tuple[str, str, int]]) -> list[bytes]:
    """The bytes of each (server path, relpath, listed size), in order, up to :data:`FILES_IN_FLIGHT` files'
    requests out at once: lstat, open only a regular file, read the listed size, read on only when the lstat
    or a short reply says there is more, close. Replies still out after an error go to this call's
    collector, which nobody reads again."""
    from paramiko.sftp import CMD_CLOSE, CMD_LSTAT, CMD_OPEN, CMD_READ, CMD_STATUS, SFTP_FLAG_READ, int64

    replies = _Replies()

    def send(kind: int, *args) -> int:
        return sftp._async_request(replies, kind, *args)

    def reply(num: int) -> paramiko.Message:
        while num not in replies.got:
            sftp._read_response()
        kind, msg = replies.got.pop(num)
        if kind == CMD_STATUS:
            sftp._convert_status(msg)  # raises: EOFError at the end of a file, an OSError otherwise
        return msg

    out: list[bytes] = []
    closing: list[int] = []
    window: list[list] = []  # [path, relpath, size, lstat request, its attributes, open request]
    todo = iter(paths)

    def enter() -> None:
        for path, relpath, size in todo:
            window.append([path, relpath, size, send(CMD_LSTAT, path), None, None])
            return

    def opening() -> None:
        """Open each file of the window whose lstat says it is a regular file (the server would follow a link
        or wait on a FIFO)."""
        for entry in window:
            if entry[4] is None:
                entry[4] = paramiko.SFTPAttributes._from_msg(reply(entry[3]))
                if stat.S_ISREG(entry[4].st_mode or 0):
                    entry[5] = send(CMD_OPEN, entry[0], SFTP_FLAG_READ, paramiko.SFTPAttributes())

    for _ in range(FILES_IN_FLIGHT):
        enter()
    while window:
        opening()
        _, relpath, size, _, attrs, opened = window.pop(0)
        if opened is None:
            raise RawFileUnreadable(f"{relpath}: no longer a regular file (a symbolic link?); rerun")
        try:
            handle = reply(opened).get_binary()
        except PermissionError as exc:
            raise RawFileUnreadable(f"{relpath}: {UNREADABLE} ({exc}); fix its permissions") from exc
        reads = [(at, send(CMD_READ, handle, int64(at), _CHUNK)) for at in range(0, size, _CHUNK)]
        enter()
        parts, at, short = [], 0, False
        for offset, num in reads:
            part = _data(reply, num)
            if offset == at and not short:  # after a short reply, the rest is read below
                parts.append(part)
                at += len(part)
                short = len(part) < min(_CHUNK, size - offset)
        # done when the listed size came whole and is still the file's (a change while read is caught after)
        end = at == size and attrs.st_size == size
        while not end:
            part = _data(reply, send(CMD_READ, handle, int64(at), _CHUNK))
            parts.append(part)
            at += len(part)
            end = not part
        closing.append(send(CMD_CLOSE, handle))
        out.append(b"".join(parts))
    for num in closing:
        reply(num)
    return out


def _data(reply, num: int) -> bytes:
    try:
        return reply(num).get_string()
    except EOFError:
        return b""
