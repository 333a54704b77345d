"""`@tern.endpoint`, `@tern.task_queue`, `@tern.function`: a handler and its spec in one place.

Each takes the spec's own options (docs/spec.md); what is left unset takes the gateway's
default. `name` defaults to the function's name with `_` as `-` (a class's: TextEmbedder ->
text-embedder). On a class, the deployment serves one of its methods with state its `@tern.enter`
methods load once per container (tern/cls.py says which method).

The signatures repeat on purpose: each lists the options its kind takes, so that editors and type
checkers show them and a misspelt option, or one the kind does not have, is a TypeError where the
decorator is written rather than a 400 at deploy.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Union

from .cls import class_name
from .deployment import ClassDeployment, Deployment, Handler, Volumes
from .image import Image
from .secret import Secret

ImageRef = Union[None, str, Image]
Gpu = Union[None, str, List[str]]
Secrets = Optional[Sequence[Union[str, Secret]]]


def _declare(kind: str, options: Dict[str, Any]) -> Callable[[Handler], Deployment]:
    name = options.pop("name")
    settings = {k: v for k, v in options.items() if v is not None}

    def declare(fn: Handler) -> Deployment:
        if inspect.isclass(fn):
            return ClassDeployment(fn, kind, name or class_name(fn), settings)
        return Deployment(fn, kind, name or fn.__name__.replace("_", "-").lower(), settings)

    return declare


def endpoint(
    *,
    name: Optional[str] = None,
    image: ImageRef = None,
    on_start: Union[None, str, Handler] = None,
    cpu: Optional[float] = None,
    memory: Union[None, str, int] = None,
    gpu: Gpu = None,
    gpu_count: Optional[int] = None,
    workers: Optional[int] = None,
    concurrent_requests: Optional[int] = None,
    keep_warm_seconds: Optional[int] = None,
    timeout: Optional[int] = None,
    idle_timeout: Optional[int] = None,
    max_duration: Optional[int] = None,
    autoscaler: Optional[Mapping[str, Any]] = None,
    env: Optional[Mapping[str, str]] = None,
    secrets: Secrets = None,
    volumes: Optional[Volumes] = None,
    network: Optional[Mapping[str, Any]] = None,
    pool: Optional[str] = None,
    min_reputation: Optional[float] = None,
) -> Callable[[Handler], Deployment]:
    """An HTTP endpoint: each request's JSON body is the handler's input, its return value the answer.

    timeout: seconds until the response starts; idle_timeout: seconds a started (streamed) response
    may stay silent; max_duration: seconds in all (docs/architecture.md, Endpoints).
    """
    return _declare("endpoint", dict(locals()))


def task_queue(
    *,
    name: Optional[str] = None,
    image: ImageRef = None,
    on_start: Union[None, str, Handler] = None,
    cpu: Optional[float] = None,
    memory: Union[None, str, int] = None,
    gpu: Gpu = None,
    gpu_count: Optional[int] = None,
    workers: Optional[int] = None,
    keep_warm_seconds: Optional[int] = None,
    timeout: Optional[int] = None,
    autoscaler: Optional[Mapping[str, Any]] = None,
    task_policy: Optional[Mapping[str, Any]] = None,
    schedule: Union[None, str, Mapping[str, Any]] = None,
    max_pending_tasks: Optional[int] = None,
    callback_url: Optional[str] = None,
    env: Optional[Mapping[str, str]] = None,
    secrets: Secrets = None,
    volumes: Optional[Volumes] = None,
    network: Optional[Mapping[str, Any]] = None,
    pool: Optional[str] = None,
    min_reputation: Optional[float] = None,
) -> Callable[[Handler], Deployment]:
    """A task queue: `.put()` tasks, each retried and timed by `task_policy` ({max_retries, timeout, ttl})."""
    return _declare("task_queue", dict(locals()))


def function(
    *,
    name: Optional[str] = None,
    image: ImageRef = None,
    on_start: Union[None, str, Handler] = None,
    cpu: Optional[float] = None,
    memory: Union[None, str, int] = None,
    gpu: Gpu = None,
    gpu_count: Optional[int] = None,
    workers: Optional[int] = None,
    keep_warm_seconds: Optional[int] = None,
    timeout: Optional[int] = None,
    autoscaler: Optional[Mapping[str, Any]] = None,
    task_policy: Optional[Mapping[str, Any]] = None,
    schedule: Union[None, str, Mapping[str, Any]] = None,
    env: Optional[Mapping[str, str]] = None,
    secrets: Secrets = None,
    volumes: Optional[Volumes] = None,
    network: Optional[Mapping[str, Any]] = None,
    pool: Optional[str] = None,
    min_reputation: Optional[float] = None,
) -> Callable[[Handler], Deployment]:
    """A function: `.remote()` once, `.spawn()` and `.get()` later, or `.map()` over many inputs server-side;
    `schedule="*/5 * * * *"` (or `"30s"`) runs it on a cron tick."""
    return _declare("function", dict(locals()))
