"""Volumes from inside a container: commit what this container wrote to its read-write volumes.

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
import socket


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
