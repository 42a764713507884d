"""The most specific shipped prior (docs/design.md, Priors), the one rule the fitter and the simulator share; and
shipped prices (docs/design.md, Routing table), validated strictly."""

from __future__ import annotations

import json
import math
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline import bounds
from pipeline.errors import FitError
from pipeline.fit.shipped import (
    TEMPLATE,
    Price,
    Prior,
    Shipped,
    _without_placeholders,
    load_shipped,
    priors_frame,
    shipped_prior,
)

PRIORS = [
    Prior(selector="c", quality=0.1),
    Prior(selector="c/r", region="a", quality=0.2),
    Prior(selector="c/r", quality=0.3),
    Prior(selector="c/r", quality=0.35),  # same rank as the one before it: the earlier wins
    Prior(selector="c/r/m/high", region="b", quality=0.4),
    # five segments never match a key (shipped.json refuses them: built here without validation)
    Prior.model_construct(selector="d/r/m/high/x", region="*", quality=0.9),
]


def test_more_segments_then_the_region_then_the_earlier_prior():
    keys = pl.DataFrame(
        {
            "config_key": ["c/r/m/high", "c/r/m/high", "c/r/m/high", "c/s/m/-", "d/r/m/high", "e/-/m/-"],
            "region": ["a", "b", "z", "a", "a", "a"],
        }
    )
    found = shipped_prior(keys, priors_frame(PRIORS)).sort("config_key", "region")
    assert found.rows() == [
        ("c/r/m/high", "a", 0.2),
        ("c/r/m/high", "b", 0.4),
        ("c/r/m/high", "z", 0.3),
        ("c/s/m/-", "a", 0.1),
    ]


# --------------------------------------------------------------------------- prices (docs/design.md, Routing table)
@pytest.mark.parametrize(
    "entry, accepted",
    [
        ({"selector": "codex", "usd_per_task": 0.3}, True),
        ({"selector": "codex/openai/gpt-5", "input_usd_per_mtok": 1.25, "output_usd_per_mtok": 10}, True),
        ({"selector": "a/b/c/d", "usd_per_task": 0}, True),
        ({"selector": "codex"}, False),  # no price at all
        ({"selector": "codex", "input_usd_per_mtok": 1.25}, False),  # half a token price
        ({"selector": "codex", "usd_per_task": 1, "input_usd_per_mtok": 1, "output_usd_per_mtok": 1}, False),
        ({"selector": "a/b/c/d/e", "usd_per_task": 1}, False),  # 5 segments
        ({"selector": "a//b", "usd_per_task": 1}, False),
        ({"selector": "", "usd_per_task": 1}, False),
        ({"selector": "codex", "usd_per_task": -1}, False),
        ({"selector": "codex", "usd_per_task": 1e308}, False),  # over the bound of 1e6
        ({"selector": "codex", "usd_per_task": float("inf")}, False),
        ({"selector": "codex", "usd_per_task": float("nan")}, False),
        ({"selector": "codex", "usd_per_task": "0.3"}, False),  # strict: text is not a number
        ({"selector": "codex", "usd_per_task": True}, False),
        ({"selector": "codex", "usd_per_task": 1, "currency": "EUR"}, False),  # unknown key
    ],
)
def test_a_price_is_validated_strictly(tmp_path, entry, accepted):
    path = tmp_path / "shipped.json"
    path.write_text(json.dumps({"prices": [entry]}, allow_nan=True))
    if accepted:
        assert load_shipped(path).prices[0].selector == entry["selector"]
    else:
        with pytest.raises(FitError, match="prices"):
            load_shipped(path)


def test_tokens_are_priced_per_million():
    per_task = Price(selector="codex", usd_per_task=0.3)
    per_token = Price(selector="codex/openai/gpt-5", input_usd_per_mtok=1.25, output_usd_per_mtok=10.0)
    assert per_token.tokens_cost(2_000, 500) == pytest.approx(2_000 * 1.25 / 1e6 + 500 * 10.0 / 1e6)
    assert per_task.tokens_cost(2_000, 500) is None  # a per-task price does not price tokens


def test_a_template_price_is_a_placeholder():
    left: list[str] = []
    shipped = Shipped.model_validate({**_without_placeholders(dict(TEMPLATE), left), "placeholders": left})
    assert shipped.prices == [] and "prices[0]" in left


# --------------------------------------------------------------------------- shipped.json read strictly
VALID = {
    "constants": {"objective": "utility", "prior_source": "measured", "prior_weight": 3, "exploration": 0.2,
                  "half_life_days": 30, "min_samples": 5, "lambda": 2.5, "min_quality": 0.5, "cost_floor_usd": 1e-6},
    "default_config": "c/-/m/-", "cheap_config": "c/r/small/low", "frontier_config": "c/r/big/high",
    "pinned": {"reviewer": "c/r/big/high"},
    "priors": [{"selector": "c", "region": "*", "quality": 0.7},
               {"selector": "c/r/big", "region": "review", "quality": 0.9}],
    "prices": [{"selector": "c/r", "input_usd_per_mtok": 1.25, "output_usd_per_mtok": 10.0},
               {"selector": "c/r/small", "usd_per_task": 0.01}],
}  # fmt: skip

# a change to VALID -> the start of the refusal (None: accepted)
STRICT = [
    ({"constants": {"exploration": "0.3"}}, "constants.exploration: Input should be a valid number"),
    ({"constants": {"exploration": True}}, "constants.exploration: Input should be a valid number"),
    ({"constants": {"min_samples": 1e40}}, "constants.min_samples: Input should be a valid integer"),
    ({"constants": {"min_samples": 3.0}}, "constants.min_samples: Input should be a valid integer"),
    ({"constants": {"prior_weight": 1e308}}, "constants.prior_weight: Input should be less than or equal to 1000000"),
    ({"constants": {"half_life_days": 1e308}}, "constants.half_life_days: Input should be less than or equal to"),
    ({"constants": {"lambda": 1e308}}, "constants.lambda: Input should be less than or equal to 1000000000"),
    ({"constants": {"prior_weight": -1}}, "constants.prior_weight: Input should be greater than or equal to 0"),
    ({"constants": {"exploration": 1.5}}, "constants.exploration: Input should be less than or equal to 1"),
    ({"constants": {"objective": "profit"}}, "constants.objective: Input should be"),
    ({"constants": {"exploraton": 0.1}}, "constants.exploraton: Extra inputs are not permitted"),
    ({"default_config": "a/b/c"}, "default_config: config key 'a/b/c' must have 4 parts"),
    ({"cheap_config": "codex/openai/gpt-5-codex"}, "cheap_config: config key"),
    ({"frontier_config": "a/b/c/d/e"}, "frontier_config: config key"),
    ({"frontier_config": "-/r/m/-"}, "frontier_config: config key '-/r/m/-' needs a cli and a model"),
    ({"pinned": {"reviewer": "gpt-5"}}, "pinned.reviewer: config key"),
    ({"priors": [{"selector": "a//b", "quality": 0.5}]}, "priors.0.selector: selector 'a//b' must be 1 to 4"),
    ({"priors": [{"selector": "c", "quality": 2}]}, "priors.0.quality: Input should be less than or equal to 1"),
    ({"priors": [{"selector": "c", "quality": 0.5, "weight": 3}]}, "priors.0.weight: Extra inputs are not permitted"),
    ({"cheap_confg": "c/-/m/-"}, "cheap_confg: not a key of shipped.json; did you mean 'cheap_config'?"),
    ({"found": False}, "found: not a key of shipped.json"),
    ({"cheap_config": "never/-/seen/-"}, None),  # a config the store never saw: a doctor warning, not refused
    ({"default_config": "<cli>/<route>/<model>/<effort>"}, None),  # a placeholder: ignored and named
]


def _merged(change):
    data = json.loads(json.dumps(VALID))
    for key, value in change.items():
        if isinstance(value, dict) and isinstance(data.get(key), dict):
            data[key].update(value)
        else:
            data[key] = value
    return data


@pytest.mark.parametrize("change, refusal", STRICT, ids=[json.dumps(c)[:60] for c, _ in STRICT])
def test_shipped_json_is_read_strictly(tmp_path, change, refusal):
    path = tmp_path / "shipped.json"
    path.write_text(json.dumps(_merged(change)))
    if refusal is None:
        load_shipped(path)
        return
    with pytest.raises(FitError) as info:
        load_shipped(path)
    assert str(info.value).startswith(f"{path}: {refusal}") and info.value.exit_code == 2, str(info.value)


@pytest.mark.parametrize("text", ['{"constants": {"prior_weight": Infinity}}', '{"constants": {"lambda": NaN}}'])
def test_non_finite_numbers_are_refused(tmp_path, text):
    path = tmp_path / "shipped.json"
    path.write_text(text)
    with pytest.raises(FitError, match="Input should be a finite number"):
        load_shipped(path)


def test_the_template_and_the_repositorys_file_load():
    assert load_shipped(Path(__file__).parents[2] / "fits" / "shipped.json").found
    assert Shipped.model_validate({**TEMPLATE, "default_config": None, "cheap_config": None, "frontier_config": None,
                                   "pinned": {}, "priors": [], "prices": []}).constants.prior_weight == 3.0  # fmt: skip


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**40), 10**40) | st.floats() | st.text(max_size=12)
    | st.sampled_from(["c/-/m/-", "a/b/c", "c", "c/r", "<cli>", "*", "quality_per_dollar", "shipped", "1e308"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)  # fmt: skip
PATHS = [("constants", k) for k in VALID["constants"]] + [(k,) for k in VALID if k != "constants"]
PATHS += [("priors", 0, "selector"), ("priors", 0, "quality"), ("priors", 0, "region"), ("pinned", "reviewer")]
PATHS += [("prices", 0, "selector"), ("prices", 0, "input_usd_per_mtok"), ("prices", 1, "usd_per_task")]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(changes=st.lists(st.tuples(st.sampled_from(PATHS), JSON_VALUES), max_size=4), drop=st.booleans())
def test_fuzz_shipped_json_is_accepted_within_bounds_or_refused_in_one_line(tmp_path, changes, drop):
    data = json.loads(json.dumps(VALID))
    for path, value in changes:
        node = data
        for key in path[:-1]:
            if isinstance(node, dict):
                node = node.get(key, {})
            elif isinstance(node, list) and isinstance(key, int) and key < len(node):
                node = node[key]
            else:
                node = {}
        if isinstance(node, dict):
            if drop and path[-1] in node:
                del node[path[-1]]
            else:
                node[path[-1]] = value
        elif isinstance(node, list) and isinstance(path[-1], int) and path[-1] < len(node):
            node[path[-1]] = value
    file = tmp_path / "shipped.json"
    file.write_text(json.dumps(data, allow_nan=True))
    try:
        shipped = load_shipped(file)
    except FitError as exc:
        assert "\n" not in str(exc) and str(exc).startswith(f"{file}: ")
        return
    c = shipped.constants
    bounded = [
        ("prior_weight", c.prior_weight, bounds.MAX_PRIOR_WEIGHT),
        ("half_life_days", c.half_life_days, bounds.MAX_HALF_LIFE_DAYS),
        ("lambda", c.lambda_, bounds.MAX_LAMBDA),
        ("exploration", c.exploration, 1.0),
    ]
    for name, value, high in bounded:
        assert value is None or (math.isfinite(value) and 0 <= value <= high), (name, value)
    assert c.min_samples is None or (type(c.min_samples) is int and 0 <= c.min_samples <= bounds.MAX_COUNT)
    for key in (shipped.default_config, shipped.cheap_config, shipped.frontier_config, *shipped.pinned.values()):
        assert key is None or len(key.split("/")) == 4
    for price in shipped.prices:
        assert 1 <= price.segments <= 4 and "" not in price.selector.split("/"), price
        given = [v for v in (price.usd_per_task, price.input_usd_per_mtok, price.output_usd_per_mtok) if v is not None]
        assert given and all(math.isfinite(v) and 0 <= v <= 1e6 for v in given), price
    shipped.to_constants(cost_floor_usd=1e-6)  # what the fit builds from it never fails
