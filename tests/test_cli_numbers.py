"""A fuzz (hypothesis) of the CLI's numeric options: any text given to any of them is either refused as bad input
(exit 2, no traceback) or reaches the library as a finite number within its bounds (issue 26: ``--prior-weight nan``,
``--min-quality nan`` and ``--cost-floor inf`` were tracebacks). The library call is replaced by a stub that
records what it was given, so no fit, compaction or simulation runs."""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline import bounds
from pipeline.cli import cli


class Reached(Exception):
    """What the stub raises: the command got as far as the library, with these arguments."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__("reached")
        self.args_, self.kwargs = args, kwargs


def _stub(*args: Any, **kwargs: Any) -> Any:
    raise Reached(*args, **kwargs)


#: command -> (its stubbed library function, its numeric options)
COMMANDS: dict[str, tuple[str, list[str]]] = {
    "fit": (
        "pipeline.nightly.job.run_fit",
        [
            *("--split", "--seed", "--lambda", "--cost-floor", "--prior-weight", "--exploration", "--min-exploration"),
            *("--half-life-days", "--min-samples", "--min-quality", "--pass-threshold", "--ladder-budget", "--skew"),
        ],
    ),
    "append": ("pipeline.streams.log.append", ["--max-line-bytes", "--skew"]),
    "compact": ("pipeline.compact.compact", ["--merge-threshold", "--skew"]),
    "vacuum": ("pipeline.store.upkeep.vacuum", ["--retain-hours"]),
    "sql": ("pipeline.store.run_sql", ["--timeout"]),
    "route": ("pipeline.routing.decide.decide", ["--seed"]),
    "smoke": ("pipeline.commands.smoke.smoke", ["--tasks", "--evidence-tasks", "--seed"]),
    "simulate": ("pipeline.simulate.simulate", ["--tasks", "--seed", "--corrupt", "--gate-noise"]),
}
CELLS = [(command, option) for command, (_, options) in COMMANDS.items() for option in options]
TEXT = st.one_of(
    st.sampled_from(["nan", "NaN", "inf", "-inf", "Infinity", "1e308", "1e309", "-1e308", "0", "-0", "-1", "1e-320"]),
    st.sampled_from(["1d", "0d", "3651d", "1e9s", "12h", "90min", "5x", "", " ", "0x10", "1_000", "\u0661"]),
    st.integers(-(10**30), 10**30).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.text(max_size=6),
)


def _finite(value: Any) -> bool:
    """Every number in a value the library was given is finite (and every count fits a 64-bit integer)."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, int):
        return -(2**63) <= value <= bounds.MAX_SEED
    if isinstance(value, timedelta):
        return timedelta(0) < value <= timedelta(days=3650)
    if isinstance(value, (list, tuple)):
        return all(_finite(v) for v in value)
    if hasattr(value, "model_dump"):
        return _finite(list(value.model_dump().values()))
    return True


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    root = tmp_path_factory.mktemp("numbers") / "home"
    (root / "fits").mkdir(parents=True)
    (root / "streams").mkdir()
    return root


@pytest.mark.parametrize("command,option", CELLS, ids=[f"{c}{o}" for c, o in CELLS])
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=TEXT)
def test_a_numeric_option_is_refused_or_reaches_the_library_finite(home, monkeypatch, command, option, text):
    target, _ = COMMANDS[command]
    module, name = target.rsplit(".", 1)
    monkeypatch.setattr(module + "." + name, _stub)
    where = ["--out", str(home.parent / "sim")] if command == "simulate" else ["--home", str(home)]
    where = [] if command == "smoke" else where
    rest = {"sql": ["SELECT 1"], "route": ["--region", "r"], "append": ['{"type":"task.opened","task":"T"}']}
    result = CliRunner().invoke(cli, [command, *where, option, text, *rest.get(command, [])])
    if isinstance(result.exception, Reached):
        given = [*result.exception.args_, *result.exception.kwargs.values()]
        assert all(_finite(v) for v in given), (option, text, given)
        return
    assert isinstance(result.exception, SystemExit), (option, text, repr(result.exception))
    assert result.exit_code == 2 and "Traceback" not in result.output, (option, text, result.output)
