"""``ratings smoke``: the real loop learns on a small simulated backlog; NO CHANGE exits 1 with why."""

from __future__ import annotations

from types import SimpleNamespace

from click.testing import CliRunner
from fixtures_routing import A, B, build_table, member

import pipeline.commands.smoke as smoke_module
from pipeline.cli import cli


def test_smoke_observes_learning_and_leaves_the_users_home_alone(tmp_path, monkeypatch):
    user_home, cwd = tmp_path / "user-home", tmp_path / "cwd"
    user_home.mkdir()
    cwd.mkdir()
    monkeypatch.setenv("RATINGS_HOME", str(user_home))
    monkeypatch.chdir(cwd)
    result = CliRunner().invoke(cli, ["smoke", "--tasks", "100"])
    assert result.exit_code == 0, result.output
    verdict = result.output.splitlines()[-1]
    assert verdict.startswith("VERDICT: LEARNING OBSERVED — router moved ")
    before, after = verdict.split("moved ", 1)[1].split(" -> ")
    assert before != after
    assert list(user_home.iterdir()) == [] and list(cwd.iterdir()) == []


def test_no_change_exits_1_with_the_gate_checks(monkeypatch, tmp_path):
    # Two members; B ranks first (5 per dollar against 0.9) but its test against the static A fails (lower bound
    # below 0): learning_governed stays on the static config.
    failing = {A: (40, -0.1, -0.3)}
    table = build_table(
        {
            "implement": [member(A, 0.9, 1.0), member(B, 0.5, 0.1, gate=failing)],
            "*": [member(A, 0.9, 1.0), member(B, 0.5, 0.1, gate=failing)],
        },
        static={"default_config": A},
    )
    monkeypatch.setattr(smoke_module, "_simulate", lambda home, tasks, seed: None)
    monkeypatch.setattr(smoke_module, "_fit", lambda home, seed: SimpleNamespace(table=table))
    result = CliRunner().invoke(cli, ["smoke", "--tasks", "50", "--keep", str(tmp_path / "kept")])
    assert result.exit_code == 1
    lines = result.output.splitlines()
    assert lines[-2] == (
        f"VERDICT: NO CHANGE — router stayed on {A}: gate not met in implement: {B} vs {A} on 40 shared tasks: "
        f"difference -0.1, one-sided 95% lower bound -0.3 <= 0; in *: {B} vs {A} on 40 shared tasks: "
        f"difference -0.1, one-sided 95% lower bound -0.3 <= 0; static: default_config {A}"
    )
    assert '"passes": false' in lines[-1]
    assert (tmp_path / "kept" / "streams" / "tasks.jsonl").exists()  # --keep keeps the throwaway home


def test_keep_refuses_a_non_empty_directory(tmp_path):
    (tmp_path / "x").write_text("mine")
    result = CliRunner().invoke(cli, ["smoke", "--keep", str(tmp_path)])
    assert result.exit_code == 2 and "is not empty" in result.output
