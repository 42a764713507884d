"""Compatibility with what earlier versions of the pipeline wrote, fenced here with the version that may drop it.

Nothing else in the package reads an old format. Each entry names the release that may remove it (and the test
``tests/test_compat.py`` fails once the package reaches that version, so that the removal is a decision):

| module | what it reads | may be dropped in |
|---|---|---|
| :mod:`.daily_layout` | an events table partitioned by event date too: migrated by the first compaction | 0.2.0 |
| :mod:`.manifest_store` | a store of format v1 (``store/_manifests/``): moved aside, rebuilt from the streams | 0.2.0 |
| :mod:`.routing_v1` | a ``routing-table/v1`` table (no gate tests): routed and pinned with the v1 gate | 0.2.0 |
| :mod:`.table_v1` | a table whose ``source`` says ``manifest`` (before the Delta store) | 0.2.0 |

Each module imports only the layer of the code it serves (the store, the router, the commands): this package
itself imports nothing.
"""

from __future__ import annotations

#: module -> the version of the package that may drop it.
DROP_IN = {"daily_layout": "0.2.0", "manifest_store": "0.2.0", "routing_v1": "0.2.0", "table_v1": "0.2.0"}
