"""A real luigid (Luigi's central scheduler) on 127.0.0.1 for tests."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from tests.sshd import free_port


class Luigid:
    def __init__(self, folder: Path, config: Path | None = None, port: int | None = None):
        self.folder, self.config = folder, config
        (folder / "logs").mkdir(parents=True, exist_ok=True)
        self.port = port or free_port()
        self.proc: subprocess.Popen | None = None

    def start(self) -> Luigid:
        code = "from luigi.cmdline import luigid; luigid()"
        args = ["--address", "127.0.0.1", "--port", str(self.port), "--state-path", str(self.folder / "state.pickle")]
        self.log = open(self.folder / "luigid.log", "ab")
        env = {**os.environ, "LUIGI_CONFIG_PATH": str(self.config)} if self.config else None
        self.proc = subprocess.Popen([sys.executable, "-c", code, *args], stdout=self.log, stderr=self.log, env=env)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    return self
            time.sleep(0.1)
        raise RuntimeError(f"luigid did not start: {(self.folder / 'luigid.log').read_text()[-2000:]}")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)
