"""Failures an operator can cause, for fit, route, pin, case-study, compare and doctor: one line on stderr,
exit 1 or 2, never a traceback.

A decision table: each row is a command and a damaged home (an unwritable home, a routing table holding NaN, a
file of the store missing or truncated), and the exit code and the line it must print.
"""

from __future__ import annotations

import errno
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from pipeline.cli import cli

_open, _mkdir = os.open, os.mkdir


def _unwritable(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every write inside ``home`` fails with EACCES, as on a read-only home (the tests run as root, for whom
    file modes do not apply, so the refusal is made at the system call the pipeline writes with)."""

    def refuse_open(path, flags, *args, **kwargs):
        writes = flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND)
        if writes and Path(path).absolute().is_relative_to(home):
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return _open(path, flags, *args, **kwargs)

    def refuse_mkdir(path, *args, **kwargs):
        if Path(path).absolute().is_relative_to(home):
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return _mkdir(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", refuse_open)
    monkeypatch.setattr(os, "mkdir", refuse_mkdir)


def _nan_table(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = home / "fits" / "routing-table.json"
    text = path.read_text()
    member = '"quality": '
    at = text.index(member) + len(member)
    path.write_text(text[:at] + "NaN" + text[text.index(",", at) :])


def _store_file(damage: str) -> Callable[[Path, pytest.MonkeyPatch], None]:
    def apply(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        victim = sorted((home / "store" / "events" / "family=ratings").rglob("*.parquet"))[0]
        if damage == "missing":
            victim.unlink()
        else:
            victim.write_bytes(b"PAR1 truncated")

    return apply


@pytest.fixture()
def home(tiny_fit, tmp_path) -> Path:
    copy = tmp_path / "home"
    shutil.copytree(tiny_fit[0], copy)
    return copy


ROWS = [
    # command, damage, exit code, the start of the one line
    (["fit", "--quiet"], _unwritable, 4, "error: Permission denied: "),
    (["route", "--region", "r", "--log", "--task", "T99"], _unwritable, 4, "error: Permission denied: "),
    (["pin", "--latest"], _unwritable, 4, "error: Permission denied: "),
    (["case-study", "routing-by-rating"], _unwritable, 4, "error: Permission denied: "),
    (["route", "--region", "r"], _nan_table, 2, "error: "),
    (["compare"], _nan_table, 2, "error: "),
    (["fit", "--quiet", "--no-compact"], _store_file("missing"), 1, "error: the store "),
    (["fit", "--quiet", "--no-compact"], _store_file("truncated"), 1, "error: the store "),
]


@pytest.mark.parametrize("args,damage,code,start", ROWS, ids=[f"{r[0][0]}-{r[1].__name__}" for r in ROWS])
def test_one_line_and_an_exit_code_never_a_traceback(home, monkeypatch, args, damage, code, start):
    damage(home, monkeypatch)
    result = CliRunner().invoke(cli, [*args, "--home", str(home)])
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output and isinstance(result.exception, (SystemExit, type(None)))
    lines = result.output.splitlines()
    assert len(lines) == 1 and lines[0].startswith(start), result.output


def test_the_messages_say_what_and_how_to_recover(home, monkeypatch):
    _nan_table(home, monkeypatch)
    routed = CliRunner().invoke(cli, ["route", "--region", "r", "--home", str(home)])
    assert "routing-table.json: regions." in routed.output and "finite number" in routed.output
    doctor = CliRunner().invoke(cli, ["doctor", "--home", str(home)])
    assert doctor.exit_code == 1 and "Traceback" not in doctor.output
    assert "[LIVE] fail   routing table loads:" in doctor.output and "finite number" in doctor.output
    _store_file("missing")(home, monkeypatch)
    fitted = CliRunner().invoke(cli, ["fit", "--quiet", "--no-compact", "--home", str(home)])
    assert fitted.output.endswith(
        "run `ratings verify` to see the damage, then `ratings compact --rebuild` to rebuild the store from the "
        "streams\n"
    )


@pytest.mark.parametrize(
    "linked,command",
    [
        ("fits/history", ["fit", "--quiet"]),
        ("case-studies/routing-by-rating", ["fit", "--quiet"]),
        ("case-studies/routing-by-rating", ["case-study", "routing-by-rating"]),
        ("fits", ["pin", "--latest"]),
        ("fits", ["fit", "--quiet"]),
    ],
)
def test_a_symlinked_folder_that_leaves_the_home_receives_nothing(home, tmp_path, linked, command):
    outside = tmp_path / "outside"
    shutil.copytree(home / linked, outside)
    before = {p.name: p.read_bytes() for p in outside.iterdir() if p.is_file()}
    shutil.rmtree(home / linked)
    (home / linked).symlink_to(outside)
    (home / "streams" / "tasks.jsonl").open("a").write(
        '{"type":"task.opened","task":"T50","region":"r","at":"2026-02-01T00:00:00Z","id":"open-T50"}\n'
    )
    result = CliRunner().invoke(cli, [*command, "--home", str(home)])
    assert result.exit_code == 2, result.output
    assert result.output.startswith(f"error: refusing {home / linked}") and len(result.output.splitlines()) == 1
    assert f"{home / linked} is a symbolic link to {outside}, outside the home" in result.output
    after = {p.name: p.read_bytes() for p in outside.iterdir() if p.is_file()}
    assert after == before  # nothing written, replaced or removed there
