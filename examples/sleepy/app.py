"""Sleeps 200 ms per request: slow enough that 50 concurrent calls need more than one container."""

import socket
import time


def handle(payload):
    started = time.time()
    time.sleep(float(payload.get("seconds", 0.2)))
    return {"slept_ms": round((time.time() - started) * 1000), "container": socket.gethostname()}
