"""Confinement: nothing outside the home is written; case-study names stay one directory under case-studies/."""

from __future__ import annotations

import os

import pytest

from pipeline.errors import OutsideHome, PipelineError
from pipeline.workspace import Workspace, atomic_write, case_study_name, confine


@pytest.mark.parametrize(
    "name, ok",
    [
        ("routing-by-rating", True),
        ("january.2026", True),
        ("..", False),
        (".", False),
        ("", False),
        ("../../evil", False),
        ("a/b", False),
        ("/tmp/evil", False),
        ("a\\b", False),
    ],
)
def test_a_case_study_name_is_one_directory(tmp_path, name, ok):
    home = Workspace.resolve(tmp_path)
    if ok:
        assert case_study_name(name) == name
        assert home.case_study(name) == tmp_path / "case-studies" / name
    else:
        with pytest.raises(PipelineError, match="a name is one directory under case-studies/") as info:
            home.case_study(name)
        assert info.value.exit_code == 2


# --------------------------------------------------------------------------- nothing is written outside the home


def test_a_symlinked_home_itself_is_fine(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    home = Workspace.resolve(tmp_path / "link")
    home.write(home.fits / "x.json", b"{}")
    assert (real / "fits" / "x.json").read_bytes() == b"{}"


@pytest.mark.parametrize("folder", ["fits", "store", "quarantine", "deadletter", "case-studies"])
def test_a_folder_linked_outside_the_home_is_refused(tmp_path, folder):
    home_dir, elsewhere = tmp_path / "home", tmp_path / "elsewhere"
    home_dir.mkdir()
    elsewhere.mkdir()
    (home_dir / folder).symlink_to(elsewhere)
    home = Workspace.resolve(home_dir)
    with pytest.raises(OutsideHome, match=f"{folder} is a symbolic link to .*elsewhere, outside the home") as info:
        home.write(home_dir / folder / "sub" / "file.json", b"{}")
    assert info.value.exit_code == 2
    assert list(elsewhere.iterdir()) == []


def test_a_folder_linked_inside_the_home_is_harmless(tmp_path):
    home = Workspace.resolve(tmp_path)
    (tmp_path / "elsewhere-inside").mkdir()
    (tmp_path / "fits").symlink_to(tmp_path / "elsewhere-inside")
    home.write(home.fits / "x.json", b"1")
    assert (tmp_path / "elsewhere-inside" / "x.json").read_bytes() == b"1"


def test_a_linked_file_is_refused_and_its_target_untouched(tmp_path):
    home = Workspace.resolve(tmp_path / "home")
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"precious")
    home.fits.mkdir(parents=True)
    (home.table).symlink_to(victim)
    with pytest.raises(OutsideHome, match="it is a symbolic link"):
        home.write(home.table, b"new")
    with pytest.raises(OutsideHome, match="it is a symbolic link"):
        home.open(home.table, os.O_WRONLY | os.O_TRUNC)
    assert victim.read_bytes() == b"precious"


def test_a_path_outside_the_home_is_refused(tmp_path):
    with pytest.raises(OutsideHome, match="not inside the home"):
        confine(tmp_path / "home", tmp_path / "other" / "x")
    with pytest.raises(OutsideHome, match=r"'\.\.' would leave the home"):
        confine(tmp_path / "home", tmp_path / "home" / ".." / "x")


def test_atomic_write_never_writes_through_a_planted_temp_link(tmp_path, monkeypatch):
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"precious")
    monkeypatch.setattr(os, "urandom", lambda n: b"\0" * n)
    target = tmp_path / "home" / "fits" / "t.json"
    target.parent.mkdir(parents=True)
    (target.parent / f".t.json.{os.getpid()}.00000000.tmp").symlink_to(victim)
    with pytest.raises(FileExistsError):
        atomic_write(target, b"new")
    assert victim.read_bytes() == b"precious"


# --------------------------------------------------------------------------- what a home is, and who may make one
def _folder(tmp_path, state):
    """A folder in ``state``: missing, empty, a home (streams/ or fits/), another folder, a file."""
    path = tmp_path / "target"
    if state == "empty":
        path.mkdir()
    elif state in ("streams", "fits"):
        (path / state).mkdir(parents=True)
    elif state == "other":
        path.mkdir()
        (path / "notes.txt").write_text("mine")
    elif state == "file":
        path.write_text("a file")
    return path


# state -> rule -> allowed (True) or the start of the refusal
RULES = {
    "missing": {"home": "no home at --home", "append": "no home at --home", "create": True, "init": True},
    "empty": {"home": "is not a home", "append": True, "create": True, "init": True},
    "streams": {"home": True, "append": True, "create": True, "init": True},
    "fits": {"home": True, "append": True, "create": True, "init": True},
    "other": {"home": "is not a home", "append": "is not a home", "create": "not empty and not a home", "init": True},
    "file": dict.fromkeys(("home", "append", "create", "init"), "is not a folder"),
}


@pytest.mark.parametrize("state", sorted(RULES))
@pytest.mark.parametrize("rule", ["home", "append", "create", "init"])
def test_who_may_make_a_home_of_what(tmp_path, state, rule):
    path = _folder(tmp_path, state)
    before = sorted(p.name for p in tmp_path.rglob("*"))
    want = RULES[state][rule]
    if want is True:
        assert Workspace.resolve(path).check_home(rule).root == path
    else:
        with pytest.raises(PipelineError, match=want) as info:
            Workspace.resolve(path).check_home(rule)
        assert info.value.exit_code == 2 and "\n" not in str(info.value)
    assert sorted(p.name for p in tmp_path.rglob("*")) == before  # deciding creates nothing


def test_append_makes_a_home_only_of_a_folder_it_is_named(tmp_path, monkeypatch):
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.chdir(empty)
    monkeypatch.delenv("RATINGS_HOME", raising=False)
    with pytest.raises(PipelineError, match=r"the current folder .* is not a home .*name an empty folder with --home"):
        Workspace.resolve(None).check_home("append")
    monkeypatch.setenv("RATINGS_HOME", str(empty))
    assert Workspace.resolve(None).check_home("append").root == empty  # $RATINGS_HOME names it, as --home would


def test_a_folder_inside_a_home_names_the_home(tmp_path):
    (tmp_path / "team" / "streams").mkdir(parents=True)
    team = tmp_path / "team"
    with pytest.raises(PipelineError, match=f"inside the home {team}, one of its folders: give --home {team}"):
        Workspace.resolve(tmp_path / "team" / "streams").check_home("append")


# --------------------------------------------------------------------------- the bounds: home and store roots
def test_a_store_given_through_a_link_is_confined_to_where_the_link_leads(tmp_path):
    from pipeline.confine import Bounds

    disk = tmp_path / "big-disk"
    (disk / "events").mkdir(parents=True)
    home = tmp_path / "team"
    home.mkdir()
    (home / "store").symlink_to(disk)  # --store team/store: resolved once, to big-disk
    bounds = Bounds.of(home).with_root(home / "store")
    bounds.write(home / "store" / "writer.json", b"{}")  # through the link, into the store root: fine
    assert (disk / "writer.json").read_bytes() == b"{}"
    (disk / "events" / "part").symlink_to(tmp_path)  # a link inside the store that leads out of both roots
    with pytest.raises(OutsideHome, match="a symbolic link inside the store's table"):
        bounds.check_tree(disk / "events")
    with pytest.raises(OutsideHome, match=r"not inside the home .* and the store"):
        bounds.confine(tmp_path / "elsewhere.txt")
    with pytest.raises(OutsideHome, match="outside the home"):
        Workspace.resolve(home).write(home / "store" / "x.json", b"{}")  # the home alone does not reach the store
