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
