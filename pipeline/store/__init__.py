"""The store: one Delta Lake table of events, ``<store>/events`` (docs/design.md, Storage).

- :mod:`.location`: where it lives (``--store``, ``$RATINGS_STORE``, ``<home>/store``) and how to reach it;
- :mod:`.writer`: the name under which this home's compactions land;
- :mod:`.schema`: the table's columns; :mod:`.table`: opening one version, errors as one line;
- :mod:`.views`: DuckDB views over one version (``open_store``), read-only SQL (``run_sql``);
- :mod:`.upkeep`: optimize, vacuum and sizes; :mod:`.upgrade`: moving an old or broken store aside.

Writing is :mod:`pipeline.compact`; checking is :mod:`pipeline.commands.verify`.
"""

from .location import StoreConfig, configured
from .views import Store, open_store, plain, run_sql

__all__ = ["Store", "StoreConfig", "configured", "open_store", "plain", "run_sql"]
