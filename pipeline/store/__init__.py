"""The store: one Delta Lake table of events, ``<store>/events`` (docs/design.md, Storage).

- where it lives (``--store``, ``$RATINGS_STORE``, ``<home>/store``) is the workspace's
  (:class:`pipeline.workspace.StoreLocation`);
- :mod:`.writer`: the name under which this home's compactions land; :mod:`.commits`: the record each
  compaction commits;
- :mod:`.schema`: the table's columns; :mod:`.table`: opening one version, errors as one line;
- :mod:`.views`: DuckDB views over one version (``open_store``), read-only SQL (``run_sql``);
- :mod:`.upkeep`: optimize, vacuum and sizes; :mod:`.upgrade`: moving an old or broken store aside.

Writing is :mod:`pipeline.compact`; checking is :mod:`pipeline.commands.verify`.
"""

from .views import Store, open_store, plain, run_sql

__all__ = ["Store", "open_store", "plain", "run_sql"]
