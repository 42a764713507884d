"""``ratings init``: start a home of your own (docs/design.md, Layout).

Creates the folders a home holds and a ``fits/shipped.json`` template in which every field is present: the
constants at the code defaults, and each config key and prior selector a placeholder (``<cli>/<route>/...``)
that the fit ignores, and names, until a person replaces it. Nothing that exists is overwritten, so running it
twice is harmless.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel

from ..workspace import StrPath, Workspace


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


def init_home(home: Workspace | StrPath | None = None) -> InitResult:
    """Create the home's folders and, unless one exists, the ``fits/shipped.json`` template."""
    from ..fit.shipped import TEMPLATE

    ws = Workspace.of(home)
    ws.root.mkdir(parents=True, exist_ok=True)
    created = []
    for path in ws.folders:
        if not path.is_dir():
            created.append(path.name)
        ws.folder(path)  # creates it, refusing a link that leaves the home
    shipped_path: Path = ws.confine(ws.shipped)
    if shipped_path.exists():
        state = "kept"
    else:
        ws.write(shipped_path, (json.dumps(TEMPLATE, indent=2) + "\n").encode("utf-8"))
        state = "written"
    return InitResult(home=str(ws.root), created=created, shipped=state)
