"""`python3 -m tern.spec app.py predict`: prints the deployment spec a decorated handler declares, as JSON;
`python3 -m tern.spec app.py`: every decorated handler of the module, as [{"handler", "spec"}].

`tern deploy app.py[:predict]` runs this in the handler's folder, so the decorator is the single
source of truth for the spec. The module is imported as a deploy would see it: its top-level
code runs here (heavy imports belong in the handler or its on_start).
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys

from .deployment import Deployment


def _load_module(file: str):
    """Imports the Python file `file` as a deploy would see it (its folder first on sys.path)."""
    if not os.path.isfile(file):
        raise ValueError(f"{file}: no such file")
    folder = os.path.dirname(os.path.abspath(file))
    sys.path.insert(0, folder)
    module_name = os.path.splitext(os.path.basename(file))[0]
    spec = importlib.util.spec_from_file_location(module_name, file)
    if spec is None or spec.loader is None:
        raise ValueError(f"{file}: not a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


def _spec_of(module, file: str, attribute: str, target) -> dict:
    on_start = target.options.get("on_start")
    if callable(on_start) and getattr(module, on_start.__name__, None) is not on_start:
        raise ValueError(f"on_start {on_start.__name__} must be defined at the top level of {file}")
    return target.spec(f"{file}:{attribute}")


def load_spec(file: str, attribute: str) -> dict:
    """The spec of `attribute` of the Python file `file`; ValueError saying what is wrong otherwise."""
    module = _load_module(file)
    target = getattr(module, attribute, None)
    if target is None:
        raise ValueError(f"{file} has no {attribute!r}")
    if not isinstance(target, Deployment):
        raise ValueError(f"{attribute} is not declared with @tern.endpoint, @tern.task_queue or @tern.function")
    return _spec_of(module, file, attribute, target)


def load_specs(file: str) -> list:
    """Every handler `file` declares with a decorator, in the order it defines them: [{"handler", "spec"}]."""
    module = _load_module(file)
    found = [(name, value) for name, value in vars(module).items() if isinstance(value, Deployment)]
    if not found:
        raise ValueError(f"{file} declares no handler with @tern.endpoint, @tern.task_queue or @tern.function")
    names = {}
    for attribute, target in found:
        if target.name in names:
            raise ValueError(f"{attribute} and {names[target.name]} both deploy as {target.name!r}: give one another name")
        names[target.name] = attribute
    return [{"handler": attribute, "spec": _spec_of(module, file, attribute, target)} for attribute, target in found]


def main(argv: list) -> int:
    if len(argv) not in (1, 2):
        print("usage: python3 -m tern.spec <file.py> [<handler>]", file=sys.stderr)
        return 2
    try:
        print(json.dumps(load_spec(argv[0], argv[1]) if len(argv) == 2 else load_specs(argv[0])))
    except ValueError as e:
        print(str(e), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
