"""Handlers declared with decorators, and the handles that call them once deployed.

    @tern.endpoint(cpu=1, memory="1Gi", gpu="A100")
    def predict(payload): ...

The decorator is the deployment's spec (`tern deploy app.py:predict` asks for it); the function
is left callable as it was, which is how Tern's runner calls it in the container.
"""

from __future__ import annotations

import functools
import inspect
import re
from typing import Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Union

from ._http import Http, quote, query
from .calls import WAIT_PER_REQUEST, FunctionCall, Task
from .client import default_http
from .cls import served_method
from .errors import RemoteError
from .image import Image
from .maps import map_results, start_map
from .secret import secret_names
from .volume import Volume

Handler = Callable[..., Any]
Volumes = Union[Mapping[str, Union[str, Volume]], Sequence[Union[Mapping[str, Any], Volume]]]

_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")


def _volumes(volumes: Volumes) -> List[Dict[str, Any]]:
    """`{"/data": "weights"}` or `{"/data": tern.Volume("weights")}` (Modal's shape), or a list of
    the spec's `{name, path, mode}` and `tern.Volume(name, path=...)`."""
    if isinstance(volumes, Mapping):
        return [v.mount(path) if isinstance(v, Volume) else {"name": v, "mount_path": path} for path, v in volumes.items()]
    if isinstance(volumes, (str, Volume)):
        raise TypeError('volumes takes a mapping or a list: volumes={"/data": tern.Volume("weights")}')
    return [v.mount() if isinstance(v, Volume) else dict(v) for v in volumes]


def _schedule(schedule: Union[str, Mapping[str, Any]]) -> Dict[str, Any]:
    """A cron line (`"*/5 * * * *"`), an interval (`"30s"`, `"5m"`), or the spec's mapping."""
    if isinstance(schedule, str):
        return {"every": schedule} if re.fullmatch(r"\d+[smhd]", schedule.strip()) else {"cron": schedule}
    return dict(schedule)


class Deployment:
    """A decorated handler: call it as the function it was, or `.remote()` / `.spawn()` / `.put()` /
    `.map()` the deployed version of it."""

    # A class deployment's method (ClassDeployment); a function's handler is the function itself.
    method: Optional[str] = None

    def __init__(self, fn: Optional[Handler], kind: str, name: str, options: Dict[str, Any], http: Optional[Http] = None) -> None:
        if not _NAME.match(name):
            raise ValueError(f"deployment name {name!r} must be 1-63 lower-case letters, digits or -, starting with a letter or digit")
        self.fn = fn
        self.kind = kind
        self.name = name
        # Secrets and volumes in the spec's form now, so a bad one fails where the decorator is written.
        self.options = dict(options)
        if self.options.get("secrets") is not None:
            self.options["secrets"] = secret_names(self.options["secrets"])
        if self.options.get("volumes"):
            self.options["volumes"] = _volumes(self.options["volumes"])
        self._http = http
        if fn is not None:
            # Not a class's __dict__: its methods are its instances', not this handle's.
            functools.update_wrapper(self, fn, updated=() if inspect.isclass(fn) else functools.WRAPPER_UPDATES)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.fn is None:
            raise TypeError(f"{self.name} was looked up, not declared here: call it with .remote()")
        return self.fn(*args, **kwargs)

    @property
    def http(self) -> Http:
        return self._http or default_http()

    def spec(self, handler: str) -> Dict[str, Any]:
        """The deployment spec, with `handler` (`"app.py:predict"`, `"app.py:Embedder"`) naming this
        function or class in its file; a class's names its method too (`"app.py:Embedder.run"`)."""
        spec: Dict[str, Any] = {"name": self.name, "kind": self.kind, "handler": f"{handler}.{self.method}" if self.method else handler}
        options = dict(self.options)
        image = options.pop("image", None)
        if image is not None:
            spec["image"] = image.to_spec() if isinstance(image, Image) else image
        on_start = options.pop("on_start", None)
        if on_start is not None:
            spec["on_start"] = on_start if isinstance(on_start, str) else f"{handler.rsplit(':', 1)[0]}:{on_start.__name__}"
        volumes = options.pop("volumes", None)
        if volumes:
            spec["volumes"] = volumes
        schedule = options.pop("schedule", None)
        if schedule is not None:
            spec["schedule"] = _schedule(schedule)
        spec.update({k: v for k, v in options.items() if v is not None})
        return spec

    # Calls on the deployed handler.

    def _input(self, payload: Any, kwargs: Mapping[str, Any]) -> Any:
        """The handler's one argument: any JSON value (`.remote(7)`), or a dict of `payload` and the keyword arguments."""
        if payload is not None and not isinstance(payload, Mapping):
            if kwargs:
                raise TypeError(f"{self.name}: keyword arguments go with a dict input, not with {type(payload).__name__}")
            return payload
        body = dict(payload or {})
        body.update(kwargs)
        return body

    def _route(self, prefix: str, version: Optional[int]) -> str:
        # An endpoint's path after its name is the server's own (it may be /v1): its pin is @<N>.
        pin = (f"@{version}" if prefix == "endpoint" else f"/v{version}") if version else ""
        return f"/{prefix}/{quote(self.name)}{pin}"

    def remote(self, payload: Any = None, *, version: Optional[int] = None, timeout: float = 3600, **kwargs: Any) -> Any:
        """Runs it once on Tern and answers its result: `square.remote(7)`, `predict.remote({"x": 1})` or `predict.remote(x=1)`."""
        body = self._input(payload, kwargs)
        if self.kind == "endpoint":
            return self.http.request("POST", self._route("endpoint", version), body, timeout=timeout)
        if self.kind == "task_queue":
            return self.put(body, version=version).get(timeout)
        # The first request already waits a while, so a short call answers in one round trip.
        return self._call(body, version, wait=min(WAIT_PER_REQUEST, int(timeout)), what="remote").get(timeout)

    def spawn(self, payload: Any = None, *, version: Optional[int] = None, **kwargs: Any) -> Union[FunctionCall, Task]:
        """Starts it without waiting: a FunctionCall (a function) or a Task (a task queue) to `.get()` later."""
        if self.kind == "task_queue":
            return self.put(payload, version=version, **kwargs)
        return self._call(self._input(payload, kwargs), version, wait=0, what="spawn")

    def _call(self, body: Any, version: Optional[int], wait: int, what: str) -> FunctionCall:
        """POST /function/<name>?wait=: answers once the call ends or `wait` seconds pass."""
        self._require("function", what)
        view = self.http.request("POST", f"{self._route('function', version)}{query(wait=wait)}", body)
        return FunctionCall(self.http, view["call_id"], view)

    def put(
        self,
        payload: Any = None,
        *,
        version: Optional[int] = None,
        max_retries: Optional[int] = None,
        timeout: Optional[int] = None,
        ttl: Optional[int] = None,
        callback_url: Optional[str] = None,
        **kwargs: Any,
    ) -> Task:
        """Submits a task to the queue; the policy arguments override the queue's for this task."""
        self._require("task_queue", "put")
        overrides = query(max_retries=max_retries, timeout=timeout, ttl=ttl, callback_url=callback_url)
        view = self.http.request("POST", f"{self._route('taskqueue', version)}{overrides}", self._input(payload, kwargs))
        return Task(self.http, view["task_id"], view)

    def map(
        self,
        inputs: Iterable[Any],
        *,
        chunk_size: int = 1,
        return_exceptions: bool = False,
        order: str = "input",
        version: Optional[int] = None,
        on_progress: Optional[Callable[[int, int], None]] = None,
    ) -> Iterator[Any]:
        """Maps the function over `inputs` server-side, `chunk_size` inputs per task, and yields each
        result in input order (or as chunks finish with order="completion") as it arrives.

        A failed input raises RemoteError, or with return_exceptions=True is yielded in its place
        as one. `on_progress(done, total)` is called after each result.
        """
        self._require("function", "map")
        route = f"{self._route('function', version)}/map"
        started = start_map(self.http, route, inputs, chunk_size=chunk_size, return_exceptions=return_exceptions, order=order)
        total = started["total"]
        for done, line in enumerate(map_results(self.http, started["map_id"], total), start=1):
            if on_progress:
                on_progress(done, total)
            if line["status"] == "ok":
                yield line.get("result")
                continue
            error = RemoteError(f"input {line['index']} {line['status']}: {line.get('error')}", f"{started['map_id']}#{line['index']}")
            if not return_exceptions:
                raise error
            yield error

    def _require(self, kind: str, what: str) -> None:
        if self.kind != kind:
            raise TypeError(f"{self.name} is a {self.kind}: .{what}() is for a {kind.replace('_', ' ')}")

    def __repr__(self) -> str:
        return f"tern.Deployment({self.name!r}, kind={self.kind!r})"


class ClassDeployment(Deployment):
    """A decorated class: one instance per container serves `method` (tern/cls.py says which).

    `Model()` is still the class's own instance, locally; the runner finds the class and its method
    through `__tern_class__` and `__tern_method__`.
    """

    def __init__(self, cls: type, kind: str, name: str, options: Dict[str, Any], http: Optional[Http] = None) -> None:
        super().__init__(cls, kind, name, options, http)
        self.method = served_method(cls)
        self.__tern_class__ = cls
        self.__tern_method__ = self.method

    def __getattr__(self, name: str) -> Any:
        # The name a decorated class is bound to is this handle, also in its own methods: reading
        # `Model.LABEL` or `Model.helper` there reaches the class. (Setting one sets it here.)
        cls = self.__dict__.get("__tern_class__")
        if cls is None or name.startswith("__"):
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        return getattr(cls, name)


def lookup(name: str, http: Optional[Http] = None) -> Deployment:
    """A handle on a deployment declared elsewhere; NotFoundError when this workspace has none of that name."""
    http = http or default_http()
    detail = http.get(f"/api/v1/deployments/{quote(name)}")
    return Deployment(None, detail["kind"], name, {}, http)
