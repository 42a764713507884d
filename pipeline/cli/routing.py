"""``ratings route``, ``table``, ``doctor`` and ``pin``: the published table and the loop around it."""

from __future__ import annotations

import sys

import click

from ..workspace import Workspace
from .common import (
    cli,
    emit_json,
    handle_errors,
    json_option,
    print_table,
    seed_option,
    table_option,
    workspace,
)


# --------------------------------------------------------------------------- route
@cli.command()
@workspace(optional=lambda ws, kw: kw["table"] is not None and not kw["log"])
@click.option("--region", required=True, help="The task's region (unknown regions use the global pool '*').")
@click.option(
    "--pool",
    "pool",
    multiple=True,
    metavar="KEY",
    help="A candidate config key (repeat; default: the region's members).",
)
@click.option("--role", default=None, help="The task's role (implementer, reviewer, researcher, ...).")
@click.option(
    "--failed", "failed", multiple=True, metavar="KEY", help="A config that already failed on the task (repeat)."
)
@click.option("--policy", default=None, help="Routing policy (default: learning_governed).")
@seed_option(None, "Seed of the exploration draw (default: no exploration, greedy).")
@click.option("--explain", is_flag=True, help="Add the table rows and the gate checks that decided it.")
@click.option("--log", "log", is_flag=True, help="Append the decision as a route.decided event (needs --task).")
@click.option("--task", default=None, help="The task id the logged decision belongs to.")
@table_option
@json_option
@handle_errors
def route(
    ws: Workspace,
    region: str,
    pool: tuple[str, ...],
    role: str | None,
    failed: tuple[str, ...],
    policy: str | None,
    seed: int | None,
    explain: bool,
    log: bool,
    task: str | None,
    table: str | None,
    as_json: bool,
) -> None:
    """Decide which configuration does a task, from the published routing table.

    Prints the decision for people: the config, the policy, why (the gate's test in
    words), the predicted quality, the propensity and the candidates; with --json
    the same as one object (config, policy, reason, explored, table_version,
    predicted_quality, propensity, candidates). A --pool key the table does not
    know is refused (exit 2). --log --task ID warns on stderr when the home has
    never seen the task.

    \b
    Example:
      ratings route --region implement --role implementer
      ratings route --region review --pool codex/openai/gpt-5/medium --pool kimi/moonshot/k2/- --explain
      ratings route --region implement --seed 7 --log --task T-42 --json
    """
    from ..routing.decide import decide
    from ..routing.words import decision_lines

    if log and not task:
        raise click.UsageError("--log needs --task ID (the task the decision is logged for)")
    out = decide(
        ws,
        region=region,
        pool=pool,
        role=role,
        failures=failed,
        policy=policy,
        seed=seed,
        explain=explain,
        table=table,
        log_task=task if log else None,
    )
    for warning in out.pop("warnings", []):
        click.echo(f"warning: {warning}", err=True)
    if as_json:
        emit_json(out)
        return
    for line in decision_lines(out):
        click.echo(line)


@cli.command("table")
@workspace(optional=lambda ws, kw: kw["table"] is not None)
@table_option
@json_option
@handle_errors
def table_(ws: Workspace, table: str | None, as_json: bool) -> None:
    """Print the published routing table for people: per region the choice, its quality, cost and n, the
    runner-up, the ladder, and why (the evidence gate's reason, with its numbers).

    \b
    Example:
      ratings table --home ./myteam
      ratings table --json | jq '.regions[] | {region, config: .choice.config}'
    """
    from ..nightly.publish import read_pin
    from ..routing.decide import table_path
    from ..routing.summary import summarize
    from ..routing.table import load
    from ..routing.words import table_lines

    summary = summarize(load(table_path(ws, table)))
    pin = read_pin(ws) if table is None else None  # a pin holds the home's own table, not a file given
    pinned = pin if pin is not None and pin.version == summary.version else None
    if as_json:
        emit_json({**summary.model_dump(mode="json"), "pinned": pinned.model_dump() if pinned else None})
        return
    lines = table_lines(summary)
    if pinned is not None:
        lines.insert(
            1,
            f"pinned: `ratings pin` holds this table (from fits/{pinned.history}) since {pinned.pinned_at}; newer "
            "fits go to fits/history/ only (`ratings pin --latest` follows them again)",
        )
    for line in lines:
        click.echo(line)


# --------------------------------------------------------------------------- doctor / pin
@cli.command()
@workspace(store=True)
@json_option
@handle_errors
def doctor(ws: Workspace, as_json: bool) -> None:
    """Check that the learning loop is closed: code defaults [CODE] and this home [LIVE].

    Prints every check, then LOOP: CLOSED, or LOOP: OPEN with the reasons (exit 1).

    \b
    Example:
      ratings doctor --home ./myteam
      ratings doctor --json | jq .reasons
    """
    from ..commands.doctor import doctor as run_doctor

    report = run_doctor(ws)
    if as_json:
        emit_json(report.model_dump(mode="json"))
    else:
        for check in report.checks:
            click.echo(f"[{check.kind}] {check.status:<6} {check.name}: {check.detail}")
        click.echo("LOOP: CLOSED" if report.closed else "LOOP: OPEN")
        for reason in report.reasons:
            click.echo(f"  - {reason}")
    if not report.closed:
        sys.exit(1)


@cli.command()
@workspace()
@click.option("--latest", is_flag=True, help="Remove the pin and publish the newest fit in fits/history/ again.")
@json_option
@click.argument("version", required=False)
@handle_errors
def pin(ws: Workspace, latest: bool, as_json: bool, version: str | None) -> None:
    """Pin the published routing table to a past fit in fits/history/, or follow the newest fit again; without
    an argument, list the fits it can pin.

    The pin is recorded in fits/pin.json; `ratings doctor` reports the table as pinned, not stale.

    \b
    Example:
      ratings pin
      ratings pin 3f2a9c0d1e7b4a65
      ratings pin --latest
    """
    from ..commands.pin import pin as pin_table
    from ..commands.pin import versions

    if latest and version is not None:
        raise click.UsageError("give either VERSION or --latest, not both")
    if not latest and version is None:
        rows = versions(ws)
        if as_json:
            emit_json(rows)
        elif not rows:
            click.echo("no fit in fits/history/ yet: run `fit-routing` first")
        else:
            print_table(
                [
                    {
                        "version": r["version"],
                        "fitted_at": r["fitted_at"],
                        "store version": r["store_version"],
                        "constants": r["constants"],
                        "": " ".join(w for w, on in (("live", r["live"]), ("pinned", r["pinned"])) if on),
                    }
                    for r in rows
                ]
            )
            click.echo("pin one with `ratings pin VERSION`; `ratings pin --latest` follows the newest fit again")
        return
    result = pin_table(ws, version, latest=latest)
    if as_json:
        emit_json(result)
    elif result["pinned"]:
        click.echo(f"pinned routing table {result['pinned']} (from fits/{result['history']})")
    else:
        click.echo(f"unpinned; published the newest fit {result['table']} (from fits/{result['history']})")
