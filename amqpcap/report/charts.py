"""The plot shapes the sections share, built from small aggregated rows (never from raw rows)."""

from __future__ import annotations

import math

import plotly.graph_objects as go

from amqpcap.report.timeaxis import TimeAxis

# Histogram bins of latencies: ten per decade, bin b holds [10^(b/10), 10^((b+1)/10)) ms.
BINS_PER_DECADE = 10
# SQL for the bin of a latency column (zero and sub-microsecond values land in the lowest bin).
def log_bin(column: str) -> str:
    return f"CAST(floor(log10(greatest({column}, 0.001)) * {BINS_PER_DECADE}) AS INTEGER)"


PERCENTILES = (0.5, 0.95, 0.99)
PERCENTILE_NAMES = ("p50", "p95", "p99")
# SQL for the three percentiles of a column, as one list (DuckDB sorts the column once for all three).
def percentiles(column: str) -> str:
    return f"quantile_cont({column}, {list(PERCENTILES)})"


COLOURS = ("#4C78A8", "#F58518", "#54A24B", "#E45756", "#72B7B2", "#B279A2", "#FF9DA6", "#9D755D",
           "#BAB0AC", "#EECA3B")
OTHER = "(other)"


def colour(index: int) -> str:
    return COLOURS[index % len(COLOURS)]


def figure(height: int = 380, **layout) -> go.Figure:
    fig = go.Figure()
    fig.update_layout(template="plotly_white", height=height, margin={"l": 70, "r": 20, "t": 40, "b": 50},
                      legend={"orientation": "h", "yanchor": "bottom", "y": 1.02, "x": 0},
                      font={"size": 12}, **layout)
    return fig


def log_histogram(series: dict[str, list[tuple[int, int]]], x_title: str) -> go.Figure:
    """Step outlines of binned counts on a log x axis, one per series (bins from log_bin)."""
    fig = figure()
    bins = [b for rows in series.values() for b, _ in rows]
    low, high = min(bins), max(bins)
    edges = [10 ** (b / BINS_PER_DECADE) for b in range(low, high + 2)]
    for index, (name, rows) in enumerate(series.items()):
        counts = dict(rows)
        y = [counts.get(b, 0) for b in range(low, high + 1)]
        fig.add_trace(go.Scatter(x=edges, y=[*y, 0], name=f"{name} ({sum(y):,})", mode="lines",
                                 line={"shape": "hv", "color": colour(index), "width": 1.5},
                                 fill="tozeroy", opacity=0.8,
                                 hovertemplate="from %{x:.3g} ms: %{y:,}<extra>" + name + "</extra>"))
    fig.update_xaxes(type="log", title=x_title)
    fig.update_yaxes(title="count", rangemode="tozero")
    return fig


def percentile_dots(rows: list[tuple[str, int, list[float] | None]], x_title: str, label_width: int = 48) -> go.Figure:
    """Per group (label, count, [p50, p95, p99]): a line from p50 to p99 with a dot on each, the
    first group at the top. Groups without percentiles are left out."""
    rows = [r for r in rows if r[2] and r[2][0] is not None]
    labels = [shorten(label, label_width) for label, _, _ in rows]
    fig = figure(height=120 + 24 * max(len(rows), 3))
    for label, (_, _, q) in zip(labels, rows):
        fig.add_trace(go.Scatter(x=[q[0], q[2]], y=[label, label], mode="lines", showlegend=False,
                                 line={"color": "#BBBBBB", "width": 2}, hoverinfo="skip"))
    for index, name in enumerate(PERCENTILE_NAMES):
        fig.add_trace(go.Scatter(
            x=[q[index] for _, _, q in rows], y=labels, mode="markers", name=name,
            marker={"size": 9, "color": colour(index), "symbol": ("circle", "diamond", "square")[index]},
            customdata=[[full, n] for full, n, _ in rows],
            hovertemplate="%{customdata[0]}<br>" + name + " %{x:.3g} ms of %{customdata[1]:,}<extra></extra>"))
    values = [v for _, _, q in rows for v in q if v and v > 0]
    if values and max(values) / min(values) > 30:
        fig.update_xaxes(type="log")
    fig.update_xaxes(title=x_title)
    fig.update_yaxes(autorange="reversed", type="category")
    return fig


def time_bars(rows: list[tuple], axis: TimeAxis, y_title: str, per_second: bool = True,
              hover: dict | None = None) -> go.Figure:
    """Stacked bars per time bucket: rows of (bucket start, label, count), one colour per label in
    order of total (OTHER last). Counts become rates per second unless per_second is False."""
    totals: dict[str, float] = {}
    for _, label, count in rows:
        totals[label] = totals.get(label, 0) + count
    order = sorted(totals, key=lambda k: (k == OTHER, -totals[k]))
    scale = 1 / axis.bucket_seconds if per_second else 1
    fig = figure()
    for index, label in enumerate(order):
        mine = [r for r in rows if r[1] == label]
        texts = [hover.get((r[0], label), "") for r in mine] if hover else None
        fig.add_trace(go.Bar(
            x=[r[0] for r in mine], y=[r[2] * scale for r in mine], name=label,
            marker={"color": "#BAB0AC" if label == OTHER else colour(index), "line": {"width": 0}},
            offset=0, width=axis.bucket_us / 1000, text=texts, textposition="none",
            customdata=[r[2] for r in mine],
            hovertemplate="%{x}<br>" + label + ": %{customdata:,}" + ("<br>%{text}" if hover else "")
                          + "<extra></extra>"))
    fig.update_layout(barmode="stack", bargap=0)
    axis.apply(fig)
    fig.update_yaxes(title=y_title)
    return fig


def shorten(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 1] + "…"


def nice_number(value) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        if math.isnan(value):
            return ""
        if value == 0 or abs(value) >= 100:
            return f"{value:,.0f}"
        return f"{value:.3g}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)
