"""Tern's Python SDK: declare handlers with decorators, call them once deployed, drive sandboxes.

    import tern

    @tern.function(cpu=0.5, memory="256Mi")
    def square(payload):
        return {"square": payload["n"] ** 2}

    # tern deploy app.py:square, then:
    square.remote(n=7)                                       # {"square": 49}
    for result in square.map({"n": n} for n in range(1000)):  # in order, as they arrive
        ...

    @tern.endpoint(gpu="A10G", secrets=[tern.Secret("HF_TOKEN")], volumes={"/models": tern.Volume("weights")})
    class Embedder:                       # one instance per container
        @tern.enter                       # runs once, before the container takes work
        def load(self): ...
        @tern.method                      # serves each request
        def run(self, payload): ...

    Embedder.remote({"text": "hi"})

Configuration: TERN_GATEWAY / TERN_TOKEN, else ~/.tern/config.json (the CLI's), or tern.configure().
Inside a container, `tern.volume.commit()` commits what it wrote to its read-write volumes.
Standard library only.
"""

from . import volume
from .admin import delete_image, delete_workspace
from .calls import FunctionCall, Task
from .client import configure
from .cls import enter, method
from .decorators import endpoint, function, task_queue
from .deployment import Deployment, lookup
from .errors import (
    ApiError,
    AuthError,
    ConflictError,
    ConnectionError,
    InvalidRequestError,
    NotFoundError,
    RemoteError,
    TernError,
    UnavailableError,
)
from .image import Image
from .responses import HTTPError, Response
from .sandbox import ExecResult, Sandbox, SandboxFiles
from .secret import Secret
from .volume import Volume

__version__ = "0.1.0"

__all__ = [
    "ApiError",
    "AuthError",
    "ConflictError",
    "ConnectionError",
    "Deployment",
    "ExecResult",
    "FunctionCall",
    "HTTPError",
    "Image",
    "InvalidRequestError",
    "NotFoundError",
    "RemoteError",
    "Response",
    "Sandbox",
    "SandboxFiles",
    "Secret",
    "Task",
    "TernError",
    "UnavailableError",
    "Volume",
    "configure",
    "delete_image",
    "delete_workspace",
    "endpoint",
    "enter",
    "function",
    "lookup",
    "method",
    "task_queue",
    "volume",
]
