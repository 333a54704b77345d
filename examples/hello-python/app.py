"""A Tern endpoint with the standard library only: the Python runner imports this module from
/app, calls load() once per container, then predict(payload) for every POST."""

import os
import socket
import time

_state = {}


def load():
    # Where a real endpoint loads its model, once, so requests do not pay for it.
    _state["loaded_at"] = time.time()
    _state["greeting"] = os.environ.get("GREETING", "hello")


def predict(payload):
    return {
        _state.get("greeting", "hello"): payload.get("name", "world"),
        "container": socket.gethostname(),
        "warm_for_seconds": round(time.time() - _state.get("loaded_at", time.time()), 3),
    }
