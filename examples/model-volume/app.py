"""Model weights in a volume: downloaded once by a task, served read-only by an endpoint.

fetch (task queue, `weights` mounted read-write at /weights): streams a URL into the volume and
commits it at once (tern.volume.commit), so the next endpoint container starts with it; what is
left uncommitted is committed when the container stops (keep_warm_seconds after the task).

load / predict (endpoint, `weights` mounted read-only at /models): every container, on any
machine, starts with the committed files; a second container on a machine reuses its cache.
"""

import hashlib
import os
import urllib.request

import tern

WEIGHTS = None


def fetch(payload):
    url = payload["url"]
    name = payload.get("name") or os.path.basename(url)
    target = os.path.join("/weights", name)
    partial = target + ".part"
    with urllib.request.urlopen(url) as response, open(partial, "wb") as out:
        while True:
            block = response.read(1 << 20)
            if not block:
                break
            out.write(block)
    os.replace(partial, target)
    # The commit report: the volume's new version, and any file another writer had changed meanwhile.
    report = tern.volume.commit("weights")["volumes"]["weights"]
    return {"path": target, "bytes": os.path.getsize(target), "commit": report}


def load():
    global WEIGHTS
    WEIGHTS = {}
    for root, _dirs, files in os.walk("/models"):
        for name in files:
            path = os.path.join(root, name)
            digest = hashlib.sha256()
            with open(path, "rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    digest.update(block)
            WEIGHTS[os.path.relpath(path, "/models")] = digest.hexdigest()


def predict(payload):
    return {"weights": WEIGHTS}
