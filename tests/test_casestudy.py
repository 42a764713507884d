"""Case-study pages rendered from hand-made stats (tests/data/stats-sample.json) and from a real fit."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from pipeline.casestudy import render_case_study
from pipeline.cli import cli
from pipeline.errors import PipelineError

SAMPLE = Path(__file__).parent / "data" / "stats-sample.json"
NAME = "routing-by-rating"
CREDIT_LINKS = {
    "https://github.com/withmartian/routerbench",
    "https://github.com/shuhao02/RouterDC",
    "https://github.com/LiveCodeBench/livecodebench.github.io",
    "https://github.com/laude-institute/terminal-bench-leaderboard",
}

# The headline of the sample, worked out by hand from its numbers:
#   fitted 268/412 = 65.05% (Wilson 95% 60.32%..69.49%), shipped 231/412 = 56.07% (51.24%..60.78%),
#   difference 37/412 = +8.98 points with the bootstrap interval +4.13..+13.83 given in the file,
#   shipped under exploration 0.3: 45.17%; calibration MSE 0.1412 vs 0.1587 (CI -0.0241..-0.0109),
#   ladder 0.866 vs 0.861 at 7.2% of the best single's cost on 342 tasks; default policy 63.1%.
HEADLINE = [
    "268 of 412 (65.0%, 95% CI 60.3%–69.5%)",
    "231 of 412 (56.1%, 95% CI 51.2%–60.8%)",
    "+9.0 points (95% CI +4.1 to +13.8)",
    "would be expected to hit 45.2%",
    "0.1412 against 0.1587 for the plain mean",
    "difference 95% CI -0.0241 to -0.0109",
    "Prior family (prior source, prior weight, half-life): adopt.",
    "The published routing table uses the fitted constants.",
    "Verdict: ",
    "held-out quality 0.866 at $0.0297 per task, against 0.861 at $0.412 (7.2% of it spent by the ladders)",
    "on the 342 held-out tasks",
    "routed 260 of 412 (63.1%) held-out tasks to a best configuration",
    "Sending every task to the best single configuration of the learned tasks (opus high) would have hit 21.8%, with "
    "mean quality 0.861 at $0.412 per task against 0.771 at $0.0388 for the fitted constants.",
]


def sample() -> dict[str, Any]:
    return json.loads(SAMPLE.read_text(encoding="utf-8"))


def make_home(root: Path, stats: dict[str, Any], name: str = NAME) -> Path:
    directory = root / "case-studies" / name
    directory.mkdir(parents=True, exist_ok=True)
    (root / "fits").mkdir(exist_ok=True)  # a home: a folder with fits/ (or streams/)
    (directory / "stats.json").write_text(json.dumps(stats), encoding="utf-8")
    return root


def render(root: Path, stats: dict[str, Any], name: str = NAME) -> tuple[str, str, Path]:
    home = make_home(root, stats, name)
    rendered = render_case_study(home, name)
    html = (rendered.directory / "index.html").read_text(encoding="utf-8")
    readme = (rendered.directory / "README.md").read_text(encoding="utf-8")
    return html, readme, rendered.directory


def text_of(html: str) -> str:
    """What a reader sees: tags dropped, entities and whitespace normalised."""
    from html import unescape

    return re.sub(r"\s+", " ", unescape(re.sub(r"<[^>]+>", "", html)))


def md_text(readme: str) -> str:
    return re.sub(r"\s+", " ", readme.replace("**", "").replace("\\*", "*"))


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> tuple[str, str, Path]:
    """The sample rendered once for the tests that only read it (rendering draws three figures)."""
    return render(tmp_path_factory.mktemp("page"), sample())


def test_every_headline_number_is_in_the_html_and_the_readme(page):
    html, readme, _ = page
    for phrase in HEADLINE:
        assert phrase in text_of(html), phrase
        assert phrase in md_text(readme), phrase
    lead = text_of(html.split('aria-label="Headline">')[1].split("</section>")[0])
    # the default policy's result first, not plain quality per dollar's
    assert lead.startswith(" Default policy: learning_governed routed"), lead[:80]
    assert "Constants (plain greedy routing, without the evidence gate): of 412 eligible held-out tasks" in lead


def test_images_referenced_exist_and_are_svg(page):
    html, readme, directory = page
    sources = re.findall(r'<img src="([^"]+)" alt="([^"]+)"', html)
    assert [s for s, _ in sources] == ["grid.svg", "frontier.svg", "priors.svg"]
    assert all(len(alt) > 40 for _, alt in sources)  # alt text says what the figure shows
    assert re.findall(r"!\[[^\]]+\]\(([^)]+)\)", readme) == ["grid.svg", "frontier.svg", "priors.svg"]
    for name, _ in sources:
        data = (directory / name).read_bytes()
        assert data.lstrip().startswith(b"<?xml") and b"<svg" in data
        assert b"http://www.w3.org" in data and b"https://" not in data  # only XML namespaces


def network_references(html: str, readme: str) -> set[str]:
    """Every http(s) URL the page or README would load or link; loading (src, CSS url/import) must be none."""
    assert not re.findall(r'src="https?:', html)
    assert "@import" not in html and "url(" not in html
    links = set(re.findall(r'href="(https?:[^"]+)"', html))
    assert set(re.findall(r"\]\((https?:[^)]+)\)", readme)) == links
    return links


def test_nothing_is_fetched_from_the_network(page):
    html, readme, _ = page
    assert network_references(html, readme) == set()


def test_two_renders_give_the_same_bytes(tmp_path, page):
    first = page[2]
    _, _, second = render(tmp_path, sample())
    names = sorted(p.name for p in first.iterdir())
    assert names == ["README.md", "frontier.svg", "grid.svg", "index.html", "priors.svg", "stats.json"]
    for name in names:
        assert (first / name).read_bytes() == (second / name).read_bytes(), name


def test_a_fit_that_beats_nothing_says_so_plainly(tmp_path):
    stats = sample()
    stats["routing"].update(recommendation="keep", reason="fitted does not beat shipped on held-out")
    stats["calibration"].update(recommendation="insufficient-evidence", reason="the interval contains 0")
    stats["constants"]["published"] = "shipped"
    html, readme, _ = render(tmp_path, stats)
    for text in (text_of(html), md_text(readme)):
        assert "The fitted prior family does NOT beat the shipped one on held-out tasks." in text
        assert "Regions do NOT clearly beat the plain mean" in text
        assert (
            "Prior family (prior source, prior weight, half-life): keep. Fitted does not beat shipped on held-out."
            in text
        )
        assert "uses the shipped constants" in text
    assert html.count('class="note"') == 2


def test_absent_sections_say_not_computed_and_unknown_costs_rank_by_quality(tmp_path, page):
    shutil.copytree(page[2].parent.parent, tmp_path, dirs_exist_ok=True)  # a home rendered with a frontier
    assert (tmp_path / "case-studies" / NAME / "frontier.svg").exists()
    stats = sample()
    for key in ("signals", "ladders", "frontier", "policies"):
        stats[key] = None
    stats["cost_known"] = False
    for b in stats["baselines"].values():
        b["mean_cost_usd"] = None
    html, readme, directory = render(tmp_path, stats)
    text = text_of(html)
    for key in ("signals", "ladders", "frontier", "policies"):
        assert f"Not computed: the stats file has no {key} section" in text
    assert "ranked by quality alone" in text and "ranking is by quality alone" in text
    assert (
        "route by: cheapest" not in text
        and "cheapest" not in text.split("Against the baselines")[1].split("Sequential replay")[0]
    )  # no costs: no cheapest row of n/a
    assert not (directory / "frontier.svg").exists()  # the stale figure of the first render is gone
    assert "frontier.svg" not in html + readme


def test_ladder_with_the_target_as_gate_is_an_upper_bound(tmp_path, page):
    assert "upper bound for a perfect verifier" not in page[0]
    stats = sample()
    stats["ladders"]["summary"]["gate_is_target"] = True
    html, readme, _ = render(tmp_path, stats)
    assert "This ladder figure is an upper bound for a perfect verifier" in text_of(html)
    assert "The ladder point is an upper bound for a perfect verifier" in text_of(html)
    assert "upper bound for a perfect verifier" in readme


@pytest.mark.parametrize(
    "name, link",
    [
        ("routerbench", "https://github.com/withmartian/routerbench"),
        ("livecodebench", "https://github.com/LiveCodeBench/livecodebench.github.io"),
        ("terminal-bench", "https://github.com/laude-institute/terminal-bench-leaderboard"),
    ],
)
def test_real_data_sources_are_credited(tmp_path, name, link):
    stats = sample()
    stats["name"] = name
    stats["source"]["credit"] = f"Imported from the {name} long table."
    html, readme, _ = render(tmp_path, stats, name)
    links = network_references(html, readme)
    assert link in links and links <= CREDIT_LINKS
    assert f"Imported from the {name} long table." in text_of(html)


def test_every_figure_names_its_source(page):
    html = page[0]
    captions = re.findall(r"<figcaption>(.*?)</figcaption>", html, re.S)
    assert len(captions) == 3
    for caption in captions:
        text = text_of(caption)
        assert "store table version 7 (6,240 ratings, 9,120 tasks)" in text
        assert "fitted by fit-routing --home . --case-study routing-by-rating" in text
        assert "drawn by ratings case-study routing-by-rating" in text
    assert "Diagnostic only" in captions[0]


def test_page_fits_a_phone(page):
    html = page[0]
    assert '<meta name="viewport" content="width=device-width, initial-scale=1">' in html
    assert "figure img{display:block;width:100%" in html and "@media (max-width:36rem)" in html
    assert '<table class="wide">' in html and 'data-label="hit rate"' in html


def test_cli_renders_and_reports_a_missing_stats_file(tmp_path):
    make_home(tmp_path, sample())
    result = CliRunner().invoke(cli, ["case-study", NAME, "--home", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["files"] == ["index.html", "README.md", "frontier.svg", "grid.svg", "priors.svg"]
    result = CliRunner().invoke(cli, ["case-study", "nope", "--home", str(tmp_path)])
    assert result.exit_code == 2
    assert "case-studies/nope/stats.json: no stats.json; run `fit-routing --case-study nope` first" in result.output
    with pytest.raises(PipelineError, match="not a case-study-stats/v1 file"):
        render(tmp_path, {"name": "broken"}, "broken")


def test_renders_the_fitters_own_stats(tmp_path, tiny_fit):
    fitted_home, result = tiny_fit
    stats = json.loads((fitted_home / "case-studies" / NAME / "stats.json").read_text(encoding="utf-8"))
    html, readme, _ = render(tmp_path, stats)
    fitted = result.stats.routing.fitted
    phrase = f"{fitted.hits} of {fitted.n} ("
    assert phrase in text_of(html) and phrase in md_text(readme)
    assert f"half-life): {result.stats.routing.recommendation}." in text_of(html)
    assert f"Verdict: {result.stats.routing.exploration.recommendation}." in text_of(html)


def test_a_default_policy_held_back_by_the_gate_is_explained(tmp_path, page):
    assert "did exactly what the static choice" not in page[0]
    stats = sample()
    policies = stats["policies"]["policies"]
    policies["workflow_default"] = dict(policies["learning_governed"])
    stats["policies"]["protocol"] = "each eligible held-out task routed by a learned-only table"
    html, _readme, _ = render(tmp_path, stats)
    text = text_of(html)
    assert "It did exactly what the static choice (workflow_default) does: the evidence gate" in text
    assert "the quality_per_dollar policy hit 65.0%" in text
    assert "Each eligible held-out task routed by a learned-only table." in text  # the protocol, as a sentence
    assert "the best quality per dollar in the table, no gate" in text  # what each policy does


def test_empty_signals_are_one_line_and_commands_name_the_home(tmp_path):
    stats = sample()
    stats["signals"] = {
        **(stats["signals"] or {}),
        "decisions": [],
        "prompt_versions": [],
        "off_policy": {
            "n": 0,
            "matched": 0,
            "ips": None,
            "snips": None,
            "ess": 0.0,
            "reason": "no resolved decision carries a propensity",
        },
    }
    stats["source"]["command"] = "fit-routing --home 'build/my home' --case-study routing-by-rating"
    html, _readme, _ = render(tmp_path, stats)
    text = text_of(html)
    assert "Nothing to show in this data for: logged routing decisions, prompt versions." in text
    assert "ratings case-study routing-by-rating --home 'build/my home'" in text
    assert "ratings compare --home 'build/my home'" in text


def test_a_ladder_below_the_best_single_says_so(tmp_path, page):
    assert "The ladders did NOT reach" not in page[0]
    stats = sample()
    summary = stats["ladders"]["summary"]
    summary.update(held_out_quality=0.5, best_single_quality=0.8)
    html, _readme, _ = render(tmp_path, stats)
    assert (
        "The ladders did NOT reach that configuration's quality on the held-out tasks (0.500 against 0.800)."
        in text_of(html)
    )


def test_calibration_reason_only_when_it_adds_something(tmp_path, page):
    assert "Per-region quality lowers the held-out mean squared error" not in page[0]  # it restates the numbers
    stats = sample()
    stats["calibration"].update(
        regions_mse=None,
        difference_ci95=None,
        recommendation="insufficient-evidence",
        reason="no held-out rating falls in a fitted region",
    )
    html, _, _ = render(tmp_path, stats)
    assert "Verdict: insufficient-evidence. No held-out rating falls in a fitted region." in text_of(html)


@pytest.mark.parametrize("command", [["case-study", "../../evil"], ["fit", "--case-study", "../../evil"]])
def test_cli_rejects_a_case_study_name_outside_the_home(tmp_path, command):
    home = tmp_path / "deep" / "home"
    (home / "fits").mkdir(parents=True)
    result = CliRunner().invoke(cli, [*command, "--home", str(home)])
    assert result.exit_code == 2
    assert (
        "case study '../../evil': a name is one directory under case-studies/ (no '/', not '.' or '..')"
        in result.output
    )
    assert not (tmp_path / "evil").exists()


# ------------------------------------------------------------------ a page that agrees with itself
GLOSSARY_TERMS = ("eligible task", "hit rate", "realized value", "replay", "PRM", "AIQ", "coverage", "gate")


def spaced(html: str) -> str:
    """Like :func:`text_of`, with each tag read as a space (table cells stay apart)."""
    from html import unescape

    return re.sub(r"\s+", " ", unescape(re.sub(r"<[^>]+>", " ", html)))


def test_the_glossary_defines_every_term_the_page_uses_once(page):
    html, readme, _ = page
    glossary = html.split('id="glossary"')[1]
    for term in GLOSSARY_TERMS:
        assert glossary.count(f"<strong>{term}: </strong>") == 1, term
        assert f"**{term}: **" in readme or f"**{term}:** " in readme, term


def test_no_raw_column_names_on_the_page(page):
    html, _readme, _ = page
    text = text_of(html)
    for raw in ("mean_reward", "config_key", "n_tasks", "prompt_version", "win_rate", "rated_tasks", "| n/a"):
        assert raw not in text, raw
    assert "reason n/a" not in text and "n/a n/a" not in text


def test_members_by_advantage_list_each_config_once_where_it_belongs(tmp_path):
    # Two members in region r: the top 3 and the bottom 3 both hold both of them. Each is listed once, on its side.
    stats = sample()
    counts = {"region": "r", "n_tasks": 9, "wins": None, "losses": None, "ties": None, "rated_tasks": 9}
    a = {**counts, "config_key": "c/-/a/-", "relative_advantage": 0.4, "win_rate": 0.7}
    b = {**counts, "config_key": "c/-/b/-", "relative_advantage": -0.4, "win_rate": 0.3}
    stats["signals"]["members"] = {"r": {"top": [a, b], "bottom": [b, a]}}
    html, _readme, _ = render(tmp_path, stats)
    section = spaced(html.split("Members by relative advantage")[1].split("<tbody>")[1].split("</table>")[0])
    assert section.count(" a ") == 1 and section.count(" b ") == 1
    assert "r a +0.40 above the task mean 70.0% 9" in section
    assert "r b -0.40 below the task mean 30.0% 9" in section


def test_the_page_leads_with_what_the_dispatcher_will_do(tmp_path):
    stats = sample()
    stats["routing_table"] = {
        "version": "0123456789abcdef",
        "schema_version": "routing-table/v1.1",
        "fitted_at": "2026-01-01T00:00:00Z",
        "objective": "quality_per_dollar",
        "policy": "learning_governed",
        "constants": {},
        "constants_source": "shipped",
        "static": {"cheap_config": None, "frontier_config": None, "default_config": None, "pinned": {}},
        "configs": ["c/-/a/-", "c/-/b (High)/-"],
        "regions": [
            {
                "region": "implement",
                "choice": {"config": "c/-/a/-", "quality": 0.8, "cost_usd": 0.1, "value": 8.0, "n_ratings": 40},
                "runner_up": {"config": "c/-/b/-", "quality": 0.9, "cost_usd": 1.0, "value": 0.9, "n_ratings": 12},
                "ladder": {"rungs": ["c/-/a/-", "c/-/b/-"], "source": "global", "pass_threshold": 0.5},
                "why": "learned choice in implement: c/-/a/- beats the static choice c/-/b (High)/-",
            }
        ],
    }
    html, readme, _ = render(tmp_path, stats)
    lead = html.split('aria-label="What the dispatcher will do">')[1].split("</section>")[0]
    assert html.index('aria-label="What the dispatcher will do"') < html.index('aria-label="Headline"')
    assert "implement a 0.800 $0.100 40 b (0.900, $1.00) a → b" in spaced(lead)
    assert "implement: Learned choice in implement: a beats the static choice b (High)." in spaced(lead)
    assert readme.index("## What the dispatcher will do") < readme.index("**Default policy:**")


# ------------------------------------------------------------------ a page a phone shows whole
def rows_of(html: str, marker: str) -> str:
    """The first table after ``marker``, from its opening tag."""
    after = html.split(marker, 1)[1]
    return after[after.index("<table") : after.index("</table>")]


def test_a_table_too_wide_for_a_phone_becomes_cards_and_numbers_never_wrap() -> None:
    from pipeline.casestudy.doc import table
    from pipeline.casestudy.render_html import CSS, PHONE_LETTERS, _table, narrowest

    # Four columns, but a long unbreakable first-column word and wide numbers: wider than a phone at its narrowest.
    wide = table(
        ["single configuration", "mean quality", "mean cost", "coverage"],
        [["mistralai/mistral-7b-chat", "0.607", "$0.0000813", "100.0%"]],
        numeric=[False, True, True, True],
    )
    narrow = table(["count", "value"], [["ratings", "1,234"]], numeric=[False, True])
    assert narrowest(wide) > PHONE_LETTERS >= narrowest(narrow)
    assert '<table class="wide">' in _table(wide) and "<table>" in _table(narrow)
    # A number in a text column keeps whole; text beside it may wrap.
    constants = _table(table(["constant", "shipped"], [["cost_floor_usd", "$0.000001"], ["prior_source", "shipped"]]))
    assert '<td class="nw" data-label="shipped">$0.000001</td>' in constants
    assert '<td data-label="shipped">shipped</td>' in constants
    assert "td.num,td.nw{white-space:nowrap}" in CSS


def test_a_column_without_a_header_adds_no_label_to_its_cards(page: tuple[str, str, Path]) -> None:
    html = page[0]
    members = rows_of(html, "Members by relative advantage")
    assert 'data-label=""' not in html
    assert "<td>above the task mean</td>" in members or "<td>below the task mean</td>" in members
    assert "table.wide td[data-label]::before" in html


def test_replay_counts_are_means_over_the_seeds(tmp_path: Path) -> None:
    stats = sample()
    stats["replay"]["fitted"]["tasks_routed"] = 3.53125
    stats["replay"]["fitted"]["tasks_skipped"] = 3.46875
    html, readme, _ = render(tmp_path, stats)
    text = spaced(html)
    assert "each figure the mean over" in text and "replay seeds" in text
    assert "tasks routed (mean)" in text and " 3.53 3.47 " in text and "3.53125" not in text
    assert "3.53 | 3.47 |" in readme


def test_free_text_names_configurations_by_their_short_labels(tmp_path: Path) -> None:
    stats = sample()
    key = stats["baselines"]["best_single"]["config"]
    stats["ladders"]["rule"] = {"name": "best-single", "reason": f"the best single {key} alone"}
    html, readme, _ = render(tmp_path, stats)
    from pipeline.casestudy.names import short_config

    assert key.count("/") == 3 and key not in text_of(html) and key not in readme
    assert f"The rule: The best single {short_config(key)} alone." in text_of(html)


def test_kappa_rows_that_all_agree_are_one_sentence(tmp_path: Path) -> None:
    stats = sample()
    kappas = [
        {"kappa": k, "tasks": 40, "ladders": 0, "difference": 0.0, "lower": 0.0, "spend_difference": 0.0}
        for k in (-1, 0, 1)
    ]
    stats["ladders"]["rule"] = {"name": "best-single", "folds": 4, "kappas": kappas}
    html, _readme, _ = render(tmp_path, stats)
    assert 'data-label="kappa"' not in html
    assert (
        "The same at every kappa tried (-1, 0, 1): choices that were ladders 0 of 4 folds; quality vs best single "
        "+0.0000; 95% lower bound +0.0000" in text_of(html)
    )
    kappas[1]["ladders"] = 2
    html, _readme, _ = render(tmp_path / "differs", stats)
    assert html.count('data-label="kappa"') == 3


def test_the_shipped_mark_shows_when_it_is_the_fitted_cell(tmp_path: Path) -> None:
    from pipeline.casestudy.plots import mark_sizes
    from pipeline.nightly.stats import Stats

    stats = sample()
    stats["constants"]["shipped"] = dict(stats["constants"]["fitted"])
    html, _readme, _directory = render(tmp_path, stats)
    sizes = mark_sizes(Stats.model_validate(stats))
    assert sizes["fitted"] < sizes["shipped"]  # the fitted box inside the shipped one, both seen
    assert "Here they are the same cell: the small green box inside the red one." in text_of(html)
    assert "The shipped cell is the same one." in html
    assert mark_sizes(Stats.model_validate(sample())) == {"shipped": 0.92, "fitted": 0.92}


def test_frontier_labels_stay_inside_the_axes_clear_of_markers_and_each_other() -> None:
    from pipeline.casestudy.plots import AXIS_GAP_PT, place_labels

    # Three points on the x-axis line's height and one marker in the way: labels go where they fit, or nowhere.
    labels = [(10.0, 2.0, "a/b-chat"), (60.0, 2.0, "claude-v2"), (200.0, 100.0, "gpt-4"), (205.0, 100.0, "x")]
    markers = [(x - 4, y - 4, x + 4, y + 4) for x, y, _ in labels]
    placed = place_labels(labels, markers, 240.0, 150.0)
    boxes = [b for _, _, b in placed]
    for b in boxes:
        assert b[0] >= AXIS_GAP_PT and b[2] <= 240 - AXIS_GAP_PT and b[1] >= AXIS_GAP_PT and b[3] <= 150 - AXIS_GAP_PT
        assert not any(b[0] < m[2] and m[0] < b[2] and b[1] < m[3] and m[1] < b[3] for m in markers)
    for i, a in enumerate(boxes):
        for b in boxes[i + 1 :]:
            assert not (a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3])
    assert {i for i, _, _ in placed} >= {0, 1, 2}  # room for these beside their points (above the low ones)


def test_the_frontier_names_most_singles_and_is_deterministic() -> None:
    from pipeline.casestudy.names import short_config
    from pipeline.casestudy.plots import frontier_plot
    from pipeline.nightly.stats import load_stats

    stats = load_stats(Path(__file__).parent.parent / "case-studies" / "routerbench" / "stats.json")
    first, second = frontier_plot(stats), frontier_plot(stats)
    assert first is not None and second is not None and first.svg == second.svg
    assert stats.frontier is not None
    singles = stats.frontier.singles
    named = sum(f">{short_config(s.config)}<".encode() in first.svg for s in singles)
    assert named >= len(singles) - 2


# ------------------------------------------------------------------ a backtest on the page
BACKTEST = Path(__file__).parent / "data" / "backtest-sample.json"  # ratings backtest of a hand-made 8-task table


def test_a_backtest_leads_after_the_default_policy_and_has_its_section(tmp_path):
    stats = sample()
    report = json.loads(BACKTEST.read_text(encoding="utf-8"))
    stats["backtest"] = report
    html, readme, directory = render(tmp_path, stats)
    lead = text_of(html.split('aria-label="Headline">')[1].split("</section>")[0])
    assert lead.startswith(" Default policy: learning_governed routed")
    assert lead.index("Backtest (a simulation of deployment on this table, not a deployment):") < lead.index(
        "Constants (plain greedy routing"
    )
    # the default policy's backtest comes first in the lead, with its share of the best region-level table
    default = next(r for r in report["runs"] if r["policy"] == "learning_governed")
    share = f"{100 * default['second_half']['vs_region_best']:.1f}%"
    said = lead.split("over the second half: ")[1]
    assert said.startswith(f"learning_governed from the {default['start']} start") and share in said
    section = text_of(html.split('id="backtest"')[1].split("<h2")[0])
    assert report["about"]["note"] in section
    assert "% of the best region-level table [p5, p95]" in section
    assert "References, quality_per_dollar" in section
    assert (directory / "learning-curve.svg").read_bytes().startswith(b"<?xml")
    assert "learning-curve.svg" in readme and "Backtest: the loop as a dispatcher would live it" in readme


def test_a_page_without_a_backtest_says_how_to_attach_one(page):
    html, _, directory = page
    section = text_of(html.split('id="backtest"')[1].split("<h2")[0])
    assert "No backtest is attached" in section and "fit-routing --backtest DIR/backtest.json" in section
    assert not (directory / "learning-curve.svg").exists()


def test_twenty_thousand_priors_draw_forty_and_the_page_says_so(monkeypatch):
    """Issue 26, item 8: 20,000 shipped priors made the priors figure run for over 20 minutes under the fit lock."""
    from pipeline.casestudy import plots
    from pipeline.casestudy.sections import priors_section
    from pipeline.nightly.stats import Stats

    data = sample()
    data["priors"] = [
        {"disagrees": i % 997 == 0, "measured": 0.5, "n": i % 50, "region": "*", "selector": f"c{i}", "shipped": 0.6,
         "weight": 1.0}
        for i in range(20_000)
    ]  # fmt: skip
    stats = Stats.model_validate(data)
    shown = plots.shown_priors(stats)
    assert len(shown) == 40 and sum(r.disagrees for r in shown) == 21  # every disagreeing one, then the most rated
    assert [r.selector for r in shown] == sorted((r.selector for r in shown), key=lambda s: int(s[1:]))  # file order
    drawn = []
    monkeypatch.setattr(plots, "_draw", lambda file, alt, draw: drawn.append(alt) or plots.Plot(file, alt, b""))
    plots.priors_plot(stats)
    assert drawn[0].startswith("Shipped against measured prior for 40 of 20,000 shipped priors.")
    text = str(priors_section(stats, {}))
    assert "The 40 of 20,000 shipped priors the ratings disagree with first, then the most rated" in text
