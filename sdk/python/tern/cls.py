"""Classes as handlers: state loaded once per container by `@tern.enter`, one method serving.

    @tern.endpoint(gpu="A10G")
    class Embedder:
        @tern.enter
        def load(self):
            self.model = load_model()

        @tern.method
        def run(self, payload):
            return {"vector": self.model.embed(payload["text"])}

The deployment serves one method, chosen by this rule: the method marked `@tern.method`; else
`__call__` when the class defines one; else its one public method (not `_private`, not an
`@tern.enter` method). Anything else is a TypeError where the decorator is written.
The runner makes one instance per container (no arguments), runs every `@tern.enter` method
once, before the container takes work, then calls the method with each request's or task's input.
"""

from __future__ import annotations

import inspect
import re
from typing import Any, Callable, List, Optional, TypeVar, Union, overload

F = TypeVar("F", bound=Callable[..., Any])


def _mark(fn: Optional[F], flag: str, what: str) -> Union[F, Callable[[F], F]]:
    def mark(f: F) -> F:
        if not inspect.isfunction(f):
            raise TypeError(f"@tern.{what} goes on a method defined with def, not on {type(f).__name__}")
        setattr(f, flag, True)
        return f

    return mark if fn is None else mark(fn)


@overload
def enter(fn: F) -> F: ...
@overload
def enter(fn: None = None) -> Callable[[F], F]: ...
def enter(fn: Optional[F] = None) -> Union[F, Callable[[F], F]]:
    """Marks a method the runner calls once per container, before it takes work (load a model).

    `@tern.enter` or `@tern.enter()`; it may be async. If it raises, the container fails to start.
    """
    return _mark(fn, "__tern_enter__", "enter")


@overload
def method(fn: F) -> F: ...
@overload
def method(fn: None = None) -> Callable[[F], F]: ...
def method(fn: Optional[F] = None) -> Union[F, Callable[[F], F]]:
    """Marks the method a class deployment serves: called with each request's or task's input.

    `@tern.method` or `@tern.method()`; it may be async or a generator (a streamed answer).
    """
    return _mark(fn, "__tern_method__", "method")


def _methods(cls: type) -> List[str]:
    """The plain methods of `cls` and its bases (not static or class methods, not properties), in definition order."""
    names: List[str] = []
    for klass in reversed(cls.__mro__[:-1]):
        for name in vars(klass):
            if name not in names and inspect.isfunction(inspect.getattr_static(cls, name)):
                names.append(name)
    return names


def served_method(cls: type) -> str:
    """The one method a class deployment serves (see the module's rule); TypeError saying how to choose otherwise."""
    methods = _methods(cls)
    marked = [m for m in methods if getattr(getattr(cls, m), "__tern_method__", False)]
    if len(marked) > 1:
        raise TypeError(f"{cls.__name__} marks {', '.join(marked)} with @tern.method: a class deploys one method; declare a class per method")
    if marked:
        return marked[0]
    if "__call__" in methods:
        return "__call__"
    public = [m for m in methods if not m.startswith("_") and not getattr(getattr(cls, m), "__tern_enter__", False)]
    if len(public) == 1:
        return public[0]
    found = f"it has {', '.join(public)}" if public else "it has none"
    raise TypeError(f"{cls.__name__}: mark the method to serve with @tern.method ({found})")


def class_name(cls: type) -> str:
    """A deployment name from a class name: TextEmbedder -> text-embedder."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "-", cls.__name__).replace("_", "-").lower()
