"""An image built from a base, as a spec's `image:` build."""

from __future__ import annotations

import collections.abc
import types
from typing import Any, Callable, Dict, Iterable, Mapping, Optional, Sequence, Tuple, Union

_LISTS = ("apt", "pip", "npm", "commands")
_VALUES = ("base", "workdir", "pip_index_url")

Packages = Union[str, Iterable[str]]


class _Step:
    """A chain step: on an Image, a copy with the step added; on the class, the same from `Image()`,
    so that `tern.Image.base("python:3.11-slim")` and `tern.Image.pip("numpy")` both start a chain."""

    def __init__(self, fn: Callable[..., "Image"]) -> None:
        self.fn = fn
        self.__doc__ = fn.__doc__

    def __get__(self, image: Optional["Image"], cls: type) -> Callable[..., "Image"]:
        return types.MethodType(self.fn, image if image is not None else cls())


def _flat(items: Sequence[Packages]) -> Tuple[str, ...]:
    """`("a", "b")` or `(["a", "b"],)`: the names, checked to be strings."""
    out = []
    for item in items:
        for name in [item] if isinstance(item, str) or not isinstance(item, collections.abc.Iterable) else list(item):
            if not isinstance(name, str):
                raise TypeError(f"image steps are strings, not {type(name).__name__}")
            out.append(name)
    return tuple(out)


class Image:
    """An image `tern deploy` builds layer by layer (unchanged steps come from the cache), then
    deploys by digest. Frozen: every step answers a new Image.

        tern.Image.base("python:3.11-slim").apt("ffmpeg").pip("numpy==2.1").commands("echo hi").env({"A": "1"})
        tern.Image(base="python:3.11-slim", apt=["ffmpeg"], pip=["numpy==2.1"])   # the same image

    The build runs its steps in the spec's order (apt, pip, npm, commands), whatever the order of
    the calls. `base` defaults to Tern's own base image. A registry reference
    (`"ghcr.io/x/y:1"`) needs no Image: pass the string as `image=`.
    """

    __slots__ = ("_fields",)

    def __init__(
        self,
        base: Optional[str] = None,
        apt: Sequence[str] = (),
        pip: Sequence[str] = (),
        npm: Sequence[str] = (),
        commands: Sequence[str] = (),
        env: Optional[Mapping[str, str]] = None,
        workdir: Optional[str] = None,
        pip_index_url: Optional[str] = None,
    ) -> None:
        fields: Dict[str, Any] = {"base": base, "workdir": workdir, "pip_index_url": pip_index_url}
        for key, values in (("apt", apt), ("pip", pip), ("npm", npm), ("commands", commands)):
            fields[key] = _flat([values])
        fields["env"] = {str(k): str(v) for k, v in (env or {}).items()}
        object.__setattr__(self, "_fields", fields)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"tern.Image is frozen: {name} is set by a step that answers a new Image")

    def _with(self, **changes: Any) -> "Image":
        fields = {**self._fields, **changes}
        return Image(**fields)

    @_Step
    def base(self, ref: str) -> "Image":
        """The image to build on: a registry reference (`python:3.11-slim`)."""
        return self._with(base=ref)

    @_Step
    def apt(self, *packages: Packages) -> "Image":
        """Debian packages to install: `.apt("ffmpeg", "git")` or `.apt(["ffmpeg"])`."""
        return self._with(apt=self._fields["apt"] + _flat(packages))

    @_Step
    def pip(self, *packages: Packages, index_url: Optional[str] = None) -> "Image":
        """Python packages to install: `.pip("numpy==2.1", "torch")`; `index_url` replaces PyPI."""
        return self._with(pip=self._fields["pip"] + _flat(packages), pip_index_url=index_url or self._fields["pip_index_url"])

    @_Step
    def npm(self, *packages: Packages) -> "Image":
        """npm packages to install globally: `.npm("lodash@4")`."""
        return self._with(npm=self._fields["npm"] + _flat(packages))

    @_Step
    def commands(self, *lines: Packages) -> "Image":
        """Shell commands to run, each its own layer: `.commands("echo built > /opt/marker")`."""
        return self._with(commands=self._fields["commands"] + _flat(lines))

    @_Step
    def env(self, variables: Optional[Mapping[str, str]] = None, **more: str) -> "Image":
        """Environment variables of the image: `.env({"HF_HOME": "/models"})` or `.env(HF_HOME="/models")`."""
        return self._with(env={**self._fields["env"], **(variables or {}), **more})

    @_Step
    def workdir(self, path: str) -> "Image":
        """The working directory of the image's processes."""
        return self._with(workdir=path)

    # Modal's names for the same steps.
    apt_install = apt
    pip_install = pip
    run_commands = commands

    def to_spec(self) -> Dict[str, Any]:
        """The spec's `image:` mapping, with only the fields that are set."""
        spec: Dict[str, Any] = {}
        for key in _VALUES:
            if self._fields[key] is not None:
                spec[key] = self._fields[key]
        for key in _LISTS:
            if self._fields[key]:
                spec[key] = list(self._fields[key])
        if self._fields["env"]:
            spec["env"] = dict(self._fields["env"])
        return spec

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Image) and other.to_spec() == self.to_spec()

    def __hash__(self) -> int:
        return hash(repr(self))

    def __repr__(self) -> str:
        return f"tern.Image({', '.join(f'{k}={v!r}' for k, v in self.to_spec().items())})"
