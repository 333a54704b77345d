"""`tern.Secret("HF_TOKEN")`: a workspace secret a deployment gets as an environment variable."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import List, Sequence, Union

# The gateway's rule for a spec's `secrets:` (SECRET_ENV_NAME in libs/contracts): the name is the variable's.
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")


@dataclass(frozen=True)
class Secret:
    """A workspace secret (`tern secret set HF_TOKEN`), set in each container as `$HF_TOKEN`.

    Only its name goes into the spec: the value never leaves the control plane until a container
    starts. `secrets=[tern.Secret("HF_TOKEN"), "OTHER"]` on a decorator; a plain name works too.
    """

    name: str

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _ENV_NAME.match(self.name):
            raise ValueError(f"secret {self.name!r}: a secret given to a container is named as an environment variable (HF_TOKEN: letters, digits and _)")

    @classmethod
    def from_name(cls, name: str) -> "Secret":
        """As `tern.Secret(name)` (Modal's spelling)."""
        return cls(name)


def secret_names(secrets: Sequence[Union[str, Secret]]) -> List[str]:
    """The spec's `secrets:` list from Secrets and names, each checked, duplicates dropped."""
    if isinstance(secrets, (str, Secret)):
        raise TypeError("secrets takes a list: secrets=[tern.Secret(\"HF_TOKEN\")]")
    names: List[str] = []
    for s in secrets:
        if not isinstance(s, (str, Secret)):
            raise TypeError(f"secrets holds tern.Secret or names, not {type(s).__name__}")
        name = (s if isinstance(s, Secret) else Secret(s)).name
        if name not in names:
            names.append(name)
    return names
