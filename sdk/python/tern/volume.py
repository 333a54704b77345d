"""Volumes: `tern.Volume` to mount one in a deployment, and commit from inside a container what it
wrote to its read-write volumes.

    @tern.function(volumes={"/models": tern.Volume("weights", read_only=True)})

    import tern
    tern.volume.commit()           # every read-write volume of this container
    tern.volume.commit("data")     # one of them

Returns {"volumes": {name: {"outcome": "committed" or "unchanged", "version", "written", "removed",
"overwritten", "skipped"}}}: `overwritten` names the files this commit replaced that another
container had changed since; `skipped` what the copy holds that a volume does not keep (links,
empty directories).
The agent listens on a Unix socket bound into the container (TERN_AGENT_SOCKET); writes are
also committed when the container stops.
"""

import http.client
import json
import os
import re
import socket
from dataclasses import dataclass
from typing import Any, Dict, Optional

# The gateway's rule for a volume's name (VOLUME_NAME in libs/contracts).
_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout):
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self._path)


def commit(name=None, timeout=600):
    path = os.environ.get("TERN_AGENT_SOCKET")
    if not path:
        raise RuntimeError("tern.volume.commit(): this container mounts no read-write volume (no TERN_AGENT_SOCKET)")
    conn = _UnixConnection(path, timeout)
    try:
        conn.request("POST", "/volumes/commit" if name is None else f"/volumes/{name}/commit")
        response = conn.getresponse()
        body = json.loads(response.read() or b"{}")
    finally:
        conn.close()
    if response.status != 200:
        raise RuntimeError(f"tern.volume.commit(): {body.get('message', response.status)}")
    return body


@dataclass(frozen=True)
class Volume:
    """A workspace volume (`tern volume create weights`) mounted in each container of a deployment.

    `volumes={"/data": tern.Volume("weights")}` (where it mounts is the key), or in a list with
    `path=`: `volumes=[tern.Volume("weights", path="/data", read_only=True)]`. Read-write unless
    `read_only`. Inside the container, `.commit()` commits what this container wrote to it.
    """

    name: str
    read_only: bool = False
    path: Optional[str] = None

    def __post_init__(self):
        if not isinstance(self.name, str) or not _NAME.match(self.name):
            raise ValueError(f"volume {self.name!r}: a volume's name is 1-63 lower-case letters, digits or -")
        if self.path is not None and not (isinstance(self.path, str) and self.path.startswith("/")):
            raise ValueError(f"volume {self.name}: path {self.path!r} must be an absolute path")

    @classmethod
    def from_name(cls, name, read_only=False):
        """As `tern.Volume(name)` (Modal's spelling); the volume must exist when the deployment is created."""
        return cls(name, read_only=read_only)

    def mount(self, path=None) -> Dict[str, Any]:
        """The spec's `{name, path, mode}` for mounting it at `path` (else its own)."""
        at = path if path is not None else self.path
        if at is None:
            raise ValueError(f"volume {self.name}: say where it mounts: volumes={{\"/data\": tern.Volume({self.name!r})}} or tern.Volume({self.name!r}, path=\"/data\")")
        if not at.startswith("/"):
            raise ValueError(f"volume {self.name}: mount path {at!r} must be an absolute path")
        return {"name": self.name, "path": at, "mode": "ro" if self.read_only else "rw"}

    def commit(self, timeout=600):
        """Inside a container that mounts it read-write: commits what this container wrote to it."""
        return commit(self.name, timeout)
