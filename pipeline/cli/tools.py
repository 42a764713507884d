"""``ratings smoke`` and ``simulate``: throwaway homes with known truth."""

from __future__ import annotations

import json
import sys
from typing import Literal

import click

from .common import (
    Finite,
    cli,
    emit_json,
    gate_noise_option,
    handle_errors,
    json_option,
    option,
    print_table,
    seed_option,
)


# --------------------------------------------------------------------------- smoke
@cli.command()
@option("--tasks", click.IntRange(50, 100_000), 300, "Tasks in the simulated backlog.")
@option("--evidence-tasks", click.IntRange(1, 100_000), None, "Tasks of new evidence (default: max(40, tasks / 3)).")
@seed_option(0, "Simulator and fit seed.")
@option(
    "--keep",
    click.Path(file_okay=False),
    None,
    "Run in this empty directory and keep it (default: a temporary directory, removed).",
)
@json_option
@handle_errors
def smoke(tasks: int, evidence_tasks: int | None, seed: int, keep: str | None, as_json: bool) -> None:
    """Prove the loop learns: simulate, fit, route, add evidence for another config, fit, route again.

    Runs in a temporary directory and never touches your home. Prints
    VERDICT: LEARNING OBSERVED (exit 0) or VERDICT: NO CHANGE with why (exit 1).

    \b
    Example:
      ratings smoke
      ratings smoke --tasks 500 --seed 3 --keep /tmp/smoke-home
    """
    from ..commands.smoke import smoke as run_smoke

    result = run_smoke(
        tasks=tasks, evidence_tasks=evidence_tasks, seed=seed, keep=keep, say=None if as_json else click.echo
    )
    if as_json:
        emit_json(result.model_dump(mode="json"))
    else:
        click.echo(result.verdict)
        if not result.learned:
            gate = result.after.get("gate") or {}
            click.echo(f"  gate checks after the evidence: {json.dumps(gate, ensure_ascii=False)}")
    if not result.learned:
        sys.exit(1)


# --------------------------------------------------------------------------- simulate
@cli.command()
@option(
    "--out",
    click.Path(file_okay=False),
    None,
    "Home to write: streams/, fits/shipped.json and the truth file.",
    required=True,
)
@option(
    "--preset",
    click.Choice(["backlog", "scale"]),
    "backlog",
    "Built-in scenario (ignored with --scenario).",
    dest="preset_name",
)
@option(
    "--scenario",
    click.Path(dir_okay=False),
    None,
    "A scenario as JSON (see pipeline.simulate.Scenario) instead of a preset.",
    dest="scenario_file",
)
@option("--tasks", click.IntRange(1, 100_000_000), None, "Number of tasks (default: the scenario's).")
@seed_option(0, "Same seed, same bytes.")
@option(
    "--corrupt",
    Finite(0.0, 0.25),
    0.0,
    "Rate per line of torn lines, duplicates, conflicting duplicates and invalid lines each.",
)
@gate_noise_option(
    Finite(0.0, 0.5, max_open=True),
    None,
    "Probability that a gate rating disagrees with the true outcome (default: the scenario's).",
)
@option(
    "--truth",
    None,
    None,
    "Where to write the truth, relative to --out (default: truth.json; never read by the fitter).",
    dest="truth_path",
)
@click.option("--force", is_flag=True, help="Replace existing non-empty streams in --out.")
@json_option
@handle_errors
def simulate(
    out: str,
    preset_name: Literal["backlog", "scale"],
    scenario_file: str | None,
    tasks: int | None,
    seed: int,
    corrupt: float,
    gate_noise: float | None,
    truth_path: str | None,
    force: bool,
    as_json: bool,
) -> None:
    """Write a simulated backlog with known truth: real v1 streams plus truth.json.

    Deterministic for a seed. The logging policy routed with the shipped
    constants (written to fits/shipped.json), so configurations believed strong
    are over-represented: the selection bias a fit must see through.

    \b
    Example:
      ratings simulate --out /tmp/team --tasks 5000 --seed 1
      ratings simulate --out /tmp/big --preset scale --tasks 3000000 --json
      ratings simulate --out /tmp/broken --corrupt 0.01 --gate-noise 0.2
    """
    from ..simulate import load_scenario, preset
    from ..simulate import simulate as run_simulation

    scenario = load_scenario(scenario_file) if scenario_file else preset(preset_name)
    update = {k: v for k, v in (("tasks", tasks), ("gate_noise", gate_noise)) if v is not None}
    if update:
        scenario = type(scenario).model_validate({**scenario.model_dump(), **update})
    from ..workspace import Workspace

    home = Workspace.resolve(out).check_home("create")  # a new or empty folder, or a home (--force: new streams)
    result = run_simulation(home, scenario, seed=seed, corrupt=corrupt, truth_path=truth_path, overwrite=force)
    if as_json:
        emit_json(result.summary())
    else:
        print_table(result.rows(), ["what", "count"])
        click.echo(
            f"wrote {result.out}/streams and {result.truth_path} in {result.seconds:.2f} s "
            f"({result.events_per_second:,.0f} events/s)"
        )
