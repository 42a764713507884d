"""``ratings init``: start a home of your own (docs/design.md, Layout).

Creates the folders a home holds and a ``fits/shipped.json`` template in which every field is present: the
constants at the code defaults, and each config key and prior selector a placeholder (``<cli>/<route>/...``)
that the fit ignores, and names, until a person replaces it. Nothing that exists is overwritten, so running it
twice is harmless.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from pydantic import BaseModel

from ..home import Home

#: The folders of a home, in the order they are reported (``store/`` appears with the first compaction).
FOLDERS = ("streams", "quarantine", "deadletter", "fits", "case-studies")


class InitResult(BaseModel):
    """What ``ratings init`` did: the home, the folders it created and whether it wrote the template."""

    home: str
    created: list[str]
    shipped: str  # "written" or "kept" (a shipped.json was already there)

    def summary(self) -> dict[str, object]:
        return self.model_dump(mode="json")

    def text(self) -> str:
        made = ", ".join(f"{name}/" for name in self.created) or "nothing new (every folder was there)"
        template = (
            "wrote fits/shipped.json, a template: replace its <...> placeholders with your config keys "
            "(until then the fit ignores them and says so)"
            if self.shipped == "written"
            else "kept the fits/shipped.json that was there"
        )
        return (
            f"home {self.home}: created {made}; {template}\n"
            "next: append events (ratings append), then run the nightly job (fit-routing) and read the table "
            "(ratings table)"
        )


def init_home(home: str | os.PathLike[str] | Home | None = None) -> InitResult:
    """Create the home's folders and, unless one exists, the ``fits/shipped.json`` template."""
    from ..fit.shipped import TEMPLATE

    home = Home.resolve(home)
    home.root.mkdir(parents=True, exist_ok=True)
    created = []
    for name in FOLDERS:
        path = home.root / name
        if not path.is_dir():
            created.append(name)
        home.folder(path)  # creates it, refusing a link that leaves the home
    shipped_path: Path = home.fits / "shipped.json"
    home.confine(shipped_path)
    if shipped_path.exists():
        state = "kept"
    else:
        home.write(shipped_path, (json.dumps(TEMPLATE, indent=2) + "\n").encode("utf-8"))
        state = "written"
    return InitResult(home=str(home.root), created=created, shipped=state)
