"""A store of the layout before files near a target size (partitioned by family and event date) is migrated by
its first compaction, in a commit of its own that changes no data (``pipeline.compat.daily_layout``).

The store in ``tests/data/daily-layout/home`` was written by the pipeline of that layout (its ``make.py`` says how):
two compactions of four days of events, with a dead letter, a retraction, a closure, an event of an unknown type,
and new events waiting in its streams.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pipeline.commands.verify import verify
from pipeline.compact import compact
from pipeline.compat import daily_layout
from pipeline.store import open_store
from pipeline.store.table import commits, open_table, txn_ids
from pipeline.streams.log import append
from pipeline.workspace import STREAMS, Workspace
from tests.fixtures_store import rating, store_snapshot

DAILY_HOME = Path(__file__).parent / "data" / "daily-layout" / "home"
WRITER = "old-host"


def _copy(tmp_path: Path, name: str = "home") -> Path:
    home = tmp_path / name
    shutil.copytree(DAILY_HOME, home)
    return home


def _table(home: Path):
    return open_table(Workspace.of(home).store)


def _transactions(table) -> dict[str, int | None]:
    ids = [app for stream in STREAMS for app in txn_ids(WRITER, stream)] + [f"{WRITER}:home"]
    return {app: table.transaction_version(app) for app in ids}


@pytest.fixture(scope="module")
def migrated(tmp_path_factory):
    """(the old store, the same home after its first compaction with this version, the same streams rebuilt)."""
    root = tmp_path_factory.mktemp("layout")
    old, home, rebuilt = _copy(root, "old"), _copy(root, "home"), _copy(root, "rebuilt")
    result = compact(home)
    compact(rebuilt, rebuild=True)
    return old, home, rebuilt, result


def test_the_fixture_has_the_old_layout_and_reads_as_it_is(migrated):
    old, *_ = migrated
    table = _table(old)
    assert table.metadata().partition_columns == daily_layout.DAILY
    assert any("/event_date=" in uri for uri in table.file_uris())
    assert verify(old).ok
    with open_store(old) as store:  # readers read the old layout without a migration
        assert store.event_counts()["ratings"] == 24


def test_the_first_compaction_migrates_in_a_commit_of_its_own_and_then_lands_the_new_events(migrated):
    old, home, _, result = migrated
    before, table = _table(old), _table(home)
    assert table.metadata().partition_columns == ["family"]
    assert not any("event_date" in uri for uri in table.file_uris())
    assert [f.name for f in table.schema().to_arrow()][:2] == ["family", "id"]  # event_date is gone
    history = commits(table, Workspace.of(home).store)
    migration = history[before.version() + 1]
    assert migration[daily_layout.LAYOUT_KEY] == {
        "from": ["family", "event_date"],
        "to": ["family"],
        "read_version": before.version(),
        "files": len(before.file_uris()),
    }
    assert history[-1]["ratings.compaction"]["read_version"] == before.version() + 1  # then the run's own commit
    assert any("migrated the store" in note for note in result.notes)
    assert result.streams["ratings"].stored == 8 and result.streams["tasks"].stored == 8
    assert verify(home).ok


def test_the_migration_keeps_every_row_transaction_record_and_input_hash(migrated):
    old, home, _, _ = migrated
    before, after = _table(old), _table(home)
    at_migration = open_table(Workspace.of(home).store, as_of=before.version() + 1)
    assert _transactions(at_migration) == _transactions(before)  # exactly once goes on from the same offsets
    assert at_migration.metadata().id == before.metadata().id
    assert at_migration.metadata().configuration == before.metadata().configuration
    assert [c.get("ratings.compaction") for c in commits(before, Workspace.of(old).store)] == [
        c.get("ratings.compaction") for c in commits(after, Workspace.of(home).store)[: before.version() + 1]
    ]
    with open_store(old) as a, open_store(home, as_of=str(before.version() + 1)) as b:
        assert a.inputs_sha256() == b.inputs_sha256()
        for view in ("tasks", "attempts", "ratings", "retractions", "closures", "other"):
            query = f'SELECT * FROM "{view}" ORDER BY id'
            assert a.con.execute(query).fetchall() == b.con.execute(query).fetchall(), view


def test_the_migrated_store_holds_what_a_rebuild_from_the_streams_holds(migrated):
    _, home, rebuilt, _ = migrated
    assert store_snapshot(home) == store_snapshot(rebuilt)


def test_after_the_migration_compaction_goes_on_exactly_once(migrated, tmp_path):
    _, migrated_home, _, _ = migrated
    home = tmp_path / "home"
    shutil.copytree(migrated_home, home)
    version = _table(home).version()
    again = compact(home)
    assert not again.created and again.notes == [] and _table(home).version() == version
    append(home, [rating(900), rating(900)])
    result = compact(home)
    assert result.streams["ratings"].stored == 1 and result.streams["ratings"].duplicate == 1
    assert verify(home).ok


def test_a_migration_that_loses_the_race_reads_the_newest_version_again(tmp_path, monkeypatch):
    """Another writer migrated (committed) between this run's read and its commit: the commit is refused (made on
    the version read or not at all), the newest version read again, and the run goes on with no second rewrite."""
    home = _copy(tmp_path)
    real = daily_layout._rewrite
    raced = []

    def racing(table):
        if not raced:
            raced.append(True)
            real(_table(home))  # the other writer, first
        real(table)

    monkeypatch.setattr(daily_layout, "_rewrite", racing)
    result = compact(home)
    operations = [c.get(daily_layout.LAYOUT_KEY) is not None for c in commits(_table(home), Workspace.of(home).store)]
    assert operations.count(True) == 1 and raced
    assert result.streams["ratings"].stored == 8 and verify(home).ok


def test_an_unknown_partitioning_is_refused_in_one_line():
    class Table:
        def metadata(self):
            class Metadata:
                partition_columns = ("family", "hour")

            return Metadata()

    with pytest.raises(Exception, match=r"partitioned by \['family', 'hour'\], which this version does not know"):
        daily_layout.needs_migration(Table())
