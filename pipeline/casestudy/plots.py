"""The case-study figures, drawn with matplotlib into deterministic SVG bytes.

No pyplot (no global figure state, no GUI backend): each figure is a
``matplotlib.figure.Figure`` saved to SVG inside an ``rc_context`` that fixes
the hash salt (element ids), the font and text-as-text, and drops the date, so
two renders of the same stats give the same bytes.
"""

from __future__ import annotations

import io
import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple, TypedDict

from ..nightly.backtest import BacktestReport
from ..nightly.stats import ConstantSet, GridRow, Stats
from . import fmt
from .names import short_config
from .points import frontier_points

if TYPE_CHECKING:
    from matplotlib.artist import Artist
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.image import AxesImage
    from matplotlib.typing import RcKeyType

RC: dict[RcKeyType, Any] = {
    "svg.hashsalt": "ratings-case-study",
    "svg.fonttype": "none",  # text stays text: crisp, selectable, searchable
    "font.family": "DejaVu Sans",
    "font.size": 10,
    "axes.titlesize": 12,
    "axes.spines.top": False,
    "axes.spines.right": False,
}
WIDTH_IN = 4.4  # narrow on purpose: scaled to a 390 px phone, 9 pt text stays about 10 px tall
FITTED_COLOR = "#1b5e20"
SHIPPED_COLOR = "#b71c1c"


@dataclass(frozen=True)
class Plot:
    file: str
    svg: bytes
    alt: str


def _save(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": "ratings case-study"})
    return buf.getvalue()


def _draw(file: str, alt: str, draw: Callable[[Figure], None]) -> Plot:
    import matplotlib
    from matplotlib.figure import Figure

    with matplotlib.rc_context(RC):
        fig = Figure(layout="constrained")
        draw(fig)
        return Plot(file, _save(fig), alt)


# --------------------------------------------------------------------------- grid heat map
def _grid_slice(stats: Stats) -> list[GridRow]:
    """The plane of prior weight x exploration with the other constants at their fitted values.

    The fitter writes it as rows of kind ``expected_hit_rate``; without them, take the greedy rows at the fitted
    half-life and lambda. Replay rows score realized value, not hits, and never enter the heat map.
    """
    if any(r.kind == "expected_hit_rate" for r in stats.grid):
        return [r for r in stats.grid if r.kind == "expected_hit_rate"]
    fitted = stats.constants.fitted
    rows = [r for r in stats.grid if r.kind == "greedy_hit_rate"]
    return [r for r in rows if r.half_life_days == fitted.half_life_days and r.lambda_ == fitted.lambda_] or rows


def grid_heatmap(stats: Stats) -> Plot | None:
    scored = [(r, hit) for r in _grid_slice(stats) if (hit := r.held_out_diagnostic) is not None]
    if not scored:
        return None
    rows = [r for r, _ in scored]
    fitted, shipped = stats.constants.fitted, stats.constants.shipped
    sources = sorted({r.prior_source for r in rows}, key=lambda s: (s != fitted.prior_source, s))
    weights = sorted({r.prior_weight for r in rows})
    explorations = sorted({r.exploration for r in rows}, key=lambda e: (e is not None, e or 0.0))
    cells = {(r.prior_source, r.exploration, r.prior_weight): hit for r, hit in scored}
    values = list(cells.values())
    lo, hi = min(values), max(values)
    best, best_hit = max(scored, key=lambda row_hit: row_hit[1])

    sizes = mark_sizes(stats)

    def mark(ax: Axes, source: str, consts: ConstantSet, color: str, style: str, label: str) -> None:
        if consts.prior_source == source and consts.prior_weight in weights and consts.exploration in explorations:
            at = (weights.index(consts.prior_weight), explorations.index(consts.exploration))
            _outline(ax, at, sizes[label], color, style, label)

    def draw(fig: Figure) -> None:
        import numpy as np

        fig.set_size_inches(WIDTH_IN, 1.4 + len(sources) * (0.42 * len(explorations) + 0.9))
        axes = fig.subplots(len(sources), 1, squeeze=False)[:, 0]
        image: AxesImage | None = None
        for ax, source in zip(axes, sources, strict=True):
            grid = np.full((len(explorations), len(weights)), np.nan)
            for (s, e, w), v in cells.items():
                if s == source:
                    grid[explorations.index(e), weights.index(w)] = v
            image = ax.imshow(
                np.ma.masked_invalid(grid), cmap="viridis", vmin=lo, vmax=hi, aspect="auto", origin="lower"
            )
            _cell_labels(ax, grid, lo, hi)
            mark(ax, source, shipped, SHIPPED_COLOR, "--", "shipped")
            mark(ax, source, fitted, FITTED_COLOR, "-", "fitted")
            ax.set_xticks(range(len(weights)), [fmt.constant("prior_weight", w) for w in weights])
            ax.set_yticks(range(len(explorations)), ["greedy" if e is None else f"{e:g}" for e in explorations])
            ax.set_xlabel("prior weight k")
            ax.set_ylabel("exploration ε")
            ax.set_title(f"prior source: {source}", loc="left")
            ax.spines[:].set_visible(False)
        legend: dict[str, Artist] = {}  # a mark drawn on any panel, named once
        for ax in axes:
            handles, labels = ax.get_legend_handles_labels()
            for handle, label in zip(handles, labels, strict=True):
                legend.setdefault(label, handle)
        if legend:
            fig.legend(list(legend.values()), list(legend), loc="outside upper right", ncols=2, frameon=False)
        assert image is not None  # the rows name at least one prior source, so one panel was drawn
        fig.colorbar(
            image,
            ax=list(axes),
            label="held-out hit rate (diagnostic)",
            location="bottom",
            shrink=0.8,
            aspect=40,
            format=lambda v, _: f"{100 * v:.0f}%",
        )

    f, s = stats.constants.fitted, stats.constants.shipped
    fitted_cell = cells.get((f.prior_source, f.exploration, f.prior_weight))
    shipped_cell = cells.get((s.prior_source, s.exploration, s.prior_weight))
    alt = (
        f"Heat map of the held-out hit rate (diagnostic) over prior weight and exploration, "
        f"at half-life {fmt.constant('half_life_days', f.half_life_days)}. Values range from {fmt.pct(lo)} to "
        f"{fmt.pct(hi)}; the best cell is prior weight {fmt.constant('prior_weight', best.prior_weight)}, "
        f"exploration {best.exploration}, source {best.prior_source} ({fmt.pct(best_hit)}). "
        f"Fitted cell: {fmt.pct(fitted_cell)}. "
        + ("The shipped cell is the same one." if same_cell(stats) else f"Shipped cell: {fmt.pct(shipped_cell)}.")
    )
    return _draw("grid.svg", alt, draw)


def _outline(ax: Axes, at: tuple[int, int], size: float, color: str, style: str, label: str) -> None:
    """A square outline of side ``size`` around the heat-map cell ``at`` (x, y): the shipped or fitted mark."""
    from matplotlib.patches import Rectangle

    x, y = at
    ax.add_patch(
        Rectangle(
            (x - size / 2, y - size / 2),
            size,
            size,
            fill=False,
            edgecolor=color,
            linewidth=2.6,
            linestyle=style,
            label=label,
        )
    )


def _cell_labels(ax: Axes, grid: Any, lo: float, hi: float) -> None:
    """Each cell's hit rate in percent, white on the darker cells."""
    rows, columns = grid.shape
    for y in range(rows):
        for x in range(columns):
            v = grid[y, x]
            if not math.isnan(v):
                dark = (v - lo) / ((hi - lo) or 1) < 0.6
                ax.text(
                    x, y, f"{100 * v:.0f}", ha="center", va="center", fontsize=9, color="white" if dark else "black"
                )


def same_cell(stats: Stats) -> bool:
    """Whether the shipped and the fitted constants are the same cell of the grid (the same prior source, prior
    weight and exploration)."""
    f, s = stats.constants.fitted, stats.constants.shipped
    return (f.prior_source, f.prior_weight, f.exploration) == (s.prior_source, s.prior_weight, s.exploration)


def mark_sizes(stats: Stats) -> dict[str, float]:
    """The side of each box that marks a cell, in cells: the fitted box inside the shipped one when they mark
    the same cell, or the shipped box would hide under it."""
    return {"shipped": 0.92, "fitted": 0.58 if same_cell(stats) else 0.92}


# --------------------------------------------------------------------------- cost-quality frontier
class _Costed(NamedTuple):
    """A point of the cost-quality picture whose cost and quality are both known: what the figure draws."""

    kind: str
    label: str
    quality: float
    cost: float


class _Style(TypedDict):
    """How the figure draws one kind of point (keyword arguments of ``Axes.scatter``)."""

    marker: str
    color: str
    s: float
    zorder: int


def frontier_plot(stats: Stats) -> Plot | None:
    costed = [
        _Costed(p.kind, p.label, p.quality, p.cost)
        for p in frontier_points(stats)
        if p.cost is not None and p.quality is not None
    ]
    if not stats.cost_known or not costed:
        return None
    costs = [p.cost for p in costed if p.cost > 0]
    decades = math.log10(max(costs) / min(costs)) if costs else 0.0
    log_x = decades > math.log10(20)
    styles: dict[str, _Style] = {
        "single": {"marker": "o", "color": "#757575", "s": 36, "zorder": 3},
        "router": {"marker": "o", "color": "#1565c0", "s": 30, "zorder": 4},
        "ladder": {"marker": "^", "color": "#6a1b9a", "s": 110, "zorder": 6},
        "shipped": {"marker": "s", "color": SHIPPED_COLOR, "s": 70, "zorder": 5},
        "fitted": {"marker": "D", "color": FITTED_COLOR, "s": 70, "zorder": 5},
        "oracle": {"marker": "*", "color": "#ef6c00", "s": 180, "zorder": 5},
    }
    names = {
        "single": "single configurations",
        "router": "router (λ sweep)",
        "ladder": "ladder",
        "shipped": "shipped constants",
        "fitted": "fitted constants",
        "oracle": "oracle",
    }

    def draw(fig: Figure) -> None:
        fig.set_size_inches(WIDTH_IN, 4.4)
        ax = fig.subplots()
        for kind, style in styles.items():
            group = [p for p in costed if p.kind == kind]
            if not group:
                continue
            if kind == "router" and len(group) > 1:
                ordered = sorted(group, key=lambda p: p.cost)
                ax.plot([p.cost for p in ordered], [p.quality for p in ordered], color=style["color"], lw=1.5, zorder=2)
            ax.scatter([p.cost for p in group], [p.quality for p in group], label=names[kind], **style)
        if log_x:
            from matplotlib.ticker import LogLocator, NullFormatter

            ax.set_xscale("log")
            # 1-2-5 ticks over a short range; decades only over a long one, or the dollar labels collide
            ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0) if decades < 1.5 else (1.0,)))
            ax.xaxis.set_minor_formatter(NullFormatter())
        ax.xaxis.set_major_formatter(lambda v, _: f"${v:g}")
        ax.set_xlabel("mean cost per held-out task" + (" (log scale)" if log_x else ""))
        ax.set_ylabel("mean held-out quality")
        ax.grid(True, color="#e0e0e0", linewidth=0.6)
        ax.margins(x=0.06, y=0.1)  # room for labels between the lowest points and the x-axis line
        fig.legend(loc="outside lower center", ncols=2, fontsize=9, frameon=False)
        fig.draw_without_rendering()  # the final layout, so the labels are placed in real points
        drawn = [(p, styles[p.kind]["s"]) for p in costed]
        _label_singles(ax, [p for p in costed if p.kind == "single"], drawn)

    def where(kind: str) -> str:
        group = [p for p in costed if p.kind == kind]
        return "; ".join(f"{p.label}: quality {fmt.num(p.quality, 3)} at {fmt.usd(p.cost)}" for p in group)

    parts = [f"{names[k]}: {where(k)}" for k in styles if k != "single" and where(k)]
    alt = (
        "Cost against quality on the held-out tasks. " + ". ".join(parts) + ". "
        f"{sum(p.kind == 'single' for p in costed)} single configurations are drawn as grey points."
    )
    return _draw("frontier.svg", alt, draw)


Box = tuple[float, float, float, float]  # left, bottom, right, top, in points from the axes' lower left corner

#: Where a label may sit beside its point, in order of preference: offset in points, alignment (ha, va).
PLACES: tuple[tuple[float, float, str, str], ...] = (
    (5, 0, "left", "center"),
    (-5, 0, "right", "center"),
    (0, 5, "center", "bottom"),
    (0, -5, "center", "top"),
    (4, 4, "left", "bottom"),
    (4, -4, "left", "top"),
    (-4, 4, "right", "bottom"),
    (-4, -4, "right", "top"),
)
LABEL_PT = 8  # label font size
CHAR_PT = 5.0  # the width of an average character of DejaVu Sans at 8 pt, rounded up
AXIS_GAP_PT = 3  # a label keeps this far from the axes' edges (and off the axis lines)


def _box(x: float, y: float, text: str, place: tuple[float, float, str, str]) -> Box:
    dx, dy, ha, va = place
    width, height = CHAR_PT * len(text), LABEL_PT * 1.25
    left = x + dx - {"left": 0.0, "center": width / 2, "right": width}[ha]
    bottom = y + dy - {"bottom": 0.0, "center": height / 2, "top": height}[va]
    return (left, bottom, left + width, bottom + height)


def _overlaps(a: Box, b: Box) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def _within(box: Box, width: float, height: float) -> bool:
    """Inside the axes and :data:`AXIS_GAP_PT` clear of every edge."""
    gap = AXIS_GAP_PT
    return box[0] >= gap and box[1] >= gap and box[2] <= width - gap and box[3] <= height - gap


def place_labels(
    labels: list[tuple[float, float, str]], markers: list[Box], width: float, height: float
) -> list[tuple[int, tuple[float, float, str, str], Box]]:
    """Where each label goes (its index, place and box), greedy in the given order: the first place of
    :data:`PLACES` that stays inside the axes (clear of the axis lines) and overlaps no marker and no label
    placed before it. A label with no such place is left out. Positions are in points within the axes."""
    placed: list[tuple[int, tuple[float, float, str, str], Box]] = []
    for i, (x, y, text) in enumerate(labels):
        for place in PLACES:
            box = _box(x, y, text, place)
            taken = [*markers, *(b for _, _, b in placed)]
            if _within(box, width, height) and not any(_overlaps(box, b) for b in taken):
                placed.append((i, place, box))
                break
    return placed


def _label_singles(ax: Axes, singles: list[_Costed], drawn: list[tuple[_Costed, float]]) -> None:
    """Name the single configurations where a label fits (greedy by quality, see :func:`place_labels`); a
    skipped name is still in the alt text and the table under the figure. ``drawn`` is every marker with its
    area in pt² (``scatter``'s ``s``): no label covers one, nor the router's line. Call after the layout is final."""
    if not singles:
        return
    bbox = ax.get_window_extent()
    scale = 72 / ax.figure.dpi  # display pixels -> points
    origin = (bbox.x0, bbox.y0)

    def at(p: _Costed) -> tuple[float, float]:
        x, y = ax.transData.transform((p.cost, p.quality))
        return (x - origin[0]) * scale, (y - origin[1]) * scale

    markers = []
    for p, area in drawn:
        x, y = at(p)
        r = math.sqrt(area) / 2 + 1
        markers.append((x - r, y - r, x + r, y + r))
    for a, b in itertools.pairwise(sorted((p for p, _ in drawn if p.kind == "router"), key=lambda p: p.cost)):
        (xa, ya), (xb, yb) = at(a), at(b)  # the router's line: no label is struck through by it
        steps = max(1, int(math.hypot(xb - xa, yb - ya) / 2))
        for k in range(steps + 1):
            x, y = xa + (xb - xa) * k / steps, ya + (yb - ya) * k / steps
            markers.append((x - 1, y - 1, x + 1, y + 1))
    ordered = sorted(singles, key=lambda p: (-p.quality, p.label))
    labels = [(*at(p), short_config(p.label)) for p in ordered]
    for i, (dx, dy, ha, va), _ in place_labels(labels, markers, bbox.width * scale, bbox.height * scale):
        p = ordered[i]
        ax.annotate(
            labels[i][2],
            (p.cost, p.quality),
            xytext=(dx, dy),
            textcoords="offset points",
            fontsize=LABEL_PT,
            color="#424242",
            ha=ha,
            va=va,
            annotation_clip=True,
        )


# --------------------------------------------------------------------------- priors
#: The page draws and lists at most this many shipped priors (20,000 of them took matplotlib over 20 minutes).
MAX_PRIORS_SHOWN = 40


def shown_priors(stats: Stats) -> list[Any]:
    """The shipped priors the page shows: those the ratings disagree with first, then the most rated, at most
    :data:`MAX_PRIORS_SHOWN`, in the file's order (``stats.json`` keeps them all)."""
    ranked = sorted(range(len(stats.priors)), key=lambda i: (not stats.priors[i].disagrees, -stats.priors[i].n, i))
    return [stats.priors[i] for i in sorted(ranked[:MAX_PRIORS_SHOWN])]


def priors_plot(stats: Stats) -> Plot | None:
    rows = shown_priors(stats)
    if not rows:
        return None

    def draw(fig: Figure) -> None:
        # Each row's label sits above its line rather than beside the axis, so the plot keeps the full width
        # on a phone.
        fig.set_size_inches(WIDTH_IN, 0.9 + 0.62 * len(rows))
        ax = fig.subplots()
        for y, row in enumerate(rows):
            color = SHIPPED_COLOR if row.disagrees else "#455a64"
            ax.text(0, y - 0.32, f"{row.selector} @ {row.region}", fontsize=9, va="bottom", color="#212121")
            ax.scatter(
                [row.shipped],
                [y],
                marker="|",
                s=160,
                color=color,
                linewidths=2.5,
                zorder=4,
                label="shipped prior" if y == 0 else None,
            )
            if row.measured is None:
                ax.annotate("no ratings", (row.shipped, y), xytext=(8, -3), textcoords="offset points", fontsize=9)
                continue
            ax.plot([row.shipped, row.measured], [y, y], color=color, lw=1.2, zorder=3)
            ax.scatter(
                [row.measured],
                [y],
                s=16 + 6 * math.sqrt(row.n),
                color=color,
                zorder=5,
                label="measured (size: n)" if y == 0 else None,
            )
            ax.annotate(
                f"n={row.n:,}, w={row.weight:g}",
                (max(row.shipped, row.measured), y),
                xytext=(9, -3),
                textcoords="offset points",
                fontsize=9,
                color="#424242",
            )
        ax.set_yticks([])
        ax.set_ylim(len(rows) - 0.5, -0.75)
        ax.spines["left"].set_visible(False)
        ax.set_xlim(0, 1.3)
        ax.set_xticks([0, 0.25, 0.5, 0.75, 1.0])
        ax.set_xlabel("quality (red: the ratings disagree with the prior)")
        ax.grid(True, axis="x", color="#e0e0e0", linewidth=0.6)

    disagree = [r for r in rows if r.disagrees]
    of = f" of {len(stats.priors):,}" if len(rows) < len(stats.priors) else ""
    alt = f"Shipped against measured prior for {len(rows)}{of} shipped priors. " + (
        " ".join(
            f"The ratings disagree with the prior {r.selector} in {r.region}: shipped "
            f"{fmt.num(r.shipped, 2)}, measured {fmt.num(r.measured, 3)} over n={r.n:,}."
            for r in disagree
        )
        or "None disagrees by more than 0.1 with enough samples."
    )
    return _draw("priors.svg", alt, draw)


# --------------------------------------------------------------------------- backtest learning curve
#: One color per policy of a learning curve, in the report's order.
POLICY_COLORS = ("#1565c0", "#6a1b9a", "#ef6c00", "#2e7d32", "#ad1457", "#00838f", "#5d4037", "#455a64")


def learning_curve_plot(report: BacktestReport) -> Plot:
    """The backtest's value per night against its references: one panel per (objective, start), a line per policy
    (its mean over seeds, the band between its 5th and 95th percentiles), the full-information loop dashed, the
    best region-level table, the best single and the start in grey."""
    panels = list(dict.fromkeys((run.objective, run.start) for run in report.runs))
    policies = list(dict.fromkeys(run.policy for run in report.runs))
    color = {p: POLICY_COLORS[i % len(POLICY_COLORS)] for i, p in enumerate(policies)}

    def draw(fig: Figure) -> None:
        from matplotlib.ticker import MaxNLocator

        cols = min(len(panels), 2)
        rows = math.ceil(len(panels) / cols)
        fig.set_size_inches(WIDTH_IN * cols, 3.4 * rows + 0.6)
        axes = fig.subplots(rows, cols, squeeze=False)
        for n, (objective, start) in enumerate(panels):
            ax = axes[n // cols][n % cols]
            refs = report.references[objective]
            nights = [r.night + 1 for r in refs.nights]
            for label, pick, style in (
                ("best region-level table", lambda r: r.region_best.value, {"color": "#212121", "ls": "--"}),
                ("best single", lambda r: r.best_single.value, {"color": "#9e9e9e", "ls": "-"}),
                (f"start ({start})", lambda r, s=start: r.starts[s].value, {"color": "#9e9e9e", "ls": ":"}),
            ):
                ax.plot(nights, [pick(r) for r in refs.nights], lw=1.2, label=label, **style)
            for run in report.runs:
                if (run.objective, run.start) != (objective, start):
                    continue
                x = [night.night + 1 for night in run.nights]
                c = color[run.policy]
                ax.plot(x, [night.value for night in run.nights], color=c, lw=1.8, label=run.policy)
                ax.plot(
                    x,
                    [night.full_information_value for night in run.nights],
                    color=c,
                    lw=1,
                    ls="--",
                    label=f"{run.policy}, full information",
                )
                # The band of the value between its 5th and 95th percentiles over seeds (vs_region_best's, times the
                # night's best region-level value, which is the same for every seed).
                pairs = list(zip(run.nights, refs.nights, strict=True))
                best = [ref.region_best.value or 0.0 for _, ref in pairs]
                low = [(night.p5 or 0.0) * b for (night, _), b in zip(pairs, best, strict=True)]
                high = [(night.p95 or 0.0) * b for (night, _), b in zip(pairs, best, strict=True)]
                ax.fill_between(x, low, high, color=c, alpha=0.15, lw=0)
            drawn = [y for line in ax.get_lines() for y in line.get_ydata() if y is not None]
            if drawn and min(drawn) > 0 and max(drawn) / min(drawn) > 20:  # per dollar, figures decades apart
                ax.set_yscale("log")
            ranked = "" if refs.ranked_by == objective else f" (no costs: {refs.ranked_by})"
            ax.set_title(f"{objective}{ranked}, start {start}", fontsize=10)
            ax.set_xlabel("night")
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            ax.set_ylabel(
                refs.ranked_by.replace("_", " ") + " (realized" + (", log scale)" if ax.get_yscale() == "log" else ")")
            )
            ax.grid(True, color="#e0e0e0", linewidth=0.6)
        for n in range(len(panels), rows * cols):
            axes[n // cols][n % cols].set_visible(False)
        seen: dict[str, Artist] = {}
        for ax in axes.flat:
            handles, labels = ax.get_legend_handles_labels()
            for handle, label in zip(handles, labels, strict=True):
                seen.setdefault(label, handle)
        fig.legend(
            list(seen.values()), list(seen.keys()), loc="outside lower center", ncols=2, fontsize=8, frameon=False
        )
        fig.suptitle("A backtest: a simulation of deployment on a benchmark table, not a deployment", fontsize=9)

    last = ", ".join(
        f"{run.policy} ({run.objective}, start {run.start}) {fmt.pct(run.second_half.vs_region_best)} of the best "
        f"region-level table over the second half"
        for run in report.runs
    )
    alt = (
        "A backtest's learning curve (a simulation of deployment on a benchmark table, not a deployment): the realized "
        f"value per night of each policy against the references. {last}."
    )
    return _draw("learning-curve.svg", alt, draw)


FIGURE_FILES = ("grid.svg", "frontier.svg", "priors.svg", "learning-curve.svg")


def all_plots(stats: Stats) -> list[Plot]:
    """Every figure this stats file can support, in page order."""
    made = [grid_heatmap(stats), frontier_plot(stats), priors_plot(stats)]
    if stats.backtest is not None:
        made.append(learning_curve_plot(stats.backtest))
    return [p for p in made if p is not None]
