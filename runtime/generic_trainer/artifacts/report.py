"""The HTML report of a run: what a person looks at first in the KFP UI (a `system.HTML` artifact).

One self-contained page (inline CSS and SVG, no scripts, no external files): loss and metric
curves read from the run's TensorBoard event files, the resolved inputs, the strategy and
devices, and the final metrics. Every user-supplied string is escaped; secret custom_config values
never appear (the request's redacted copy is used).

The building blocks (`table`, `key_value_table`, `line_chart` over chart_geometry.py, `curves` of
the scalars tensorboard_scalars.py reads, `page`, `write`) are generic: the train report
(`trained/train_report.py`), the tuner's and the evaluator's are made of the same parts.
"""

from __future__ import annotations

import datetime
import html
import json
import logging
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from generic_trainer.artifacts import chart_geometry
from generic_trainer.artifacts.chart_geometry import MAX_POINTS  # noqa: F401 (re-exported)
from generic_trainer.artifacts.tensorboard_scalars import Points, read_scalars

log = logging.getLogger(__name__)

COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")

_CSS = """
body{font-family:-apple-system,Segoe UI,Roboto,Helvetica,Arial,sans-serif;margin:24px;color:#222;
max-width:1100px}
h1{font-size:22px;margin:0 0 4px}
h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}
.sub{color:#666;font-size:13px} table{border-collapse:collapse;font-size:13px;margin:4px 0}
th,td{border:1px solid #ddd;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f4f4f4} td.num{text-align:right;font-variant-numeric:tabular-nums}
code,pre{font-family:SFMono-Regular,Menlo,Consolas,monospace;font-size:12px}
pre{margin:0;white-space:pre-wrap}
.charts{display:flex;flex-wrap:wrap;gap:12px} .chart{border:1px solid #eee;padding:4px}
.note{color:#666;font-size:13px}
""".strip()


def esc(value: Any) -> str:
    """`value` as HTML-escaped text (quotes too, so it is safe inside attributes)."""
    return html.escape(str(value), quote=True)


def fmt(value: Any) -> str:
    """A short human form of a value: floats to 4 significant digits, containers as JSON."""
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, float):
        return f"{value:.4g}" if math.isfinite(value) else str(value)
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(value, sort_keys=True, default=str)
    return str(value)


def table(rows: Iterable[Sequence[Any]], header: Sequence[str] | None = None) -> str:
    """An HTML table; numbers are right-aligned, every cell escaped."""
    out = ["<table>"]
    if header:
        out.append("<tr>" + "".join(f"<th>{esc(h)}</th>" for h in header) + "</tr>")
    for row in rows:
        cells = []
        for cell in row:
            is_num = isinstance(cell, (int, float)) and not isinstance(cell, bool)
            cells.append(
                f'<td class="num">{esc(fmt(cell))}</td>' if is_num else f"<td>{esc(fmt(cell))}</td>"
            )
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</table>")
    return "".join(out)


def key_value_table(values: Mapping[str, Any], skip_none: bool = True) -> str:
    """A two-column table of `values` (None values left out unless `skip_none` is False)."""
    return table(
        [(k, v) for k, v in values.items() if not (skip_none and v is None)],
        header=("name", "value"),
    )


def line_chart(
    title: str,
    series: Mapping[str, Sequence[tuple[float, float]]],
    x_label: str = "step",
    y_label: str = "",
    width: int = 520,
    height: int = 280,
) -> str:
    """An inline SVG line chart; non-finite points are skipped, long series thinned.

    Args:
      title: the chart's title.
      series: {name: [(x, y), ...]}.
      x_label: the x axis's label.
      y_label: the y axis's label ("" for none).
      width: in pixels.
      height: in pixels.

    Returns:
      The chart's HTML (a note when nothing is left to draw).
    """
    clean = {
        name: chart_geometry.thin(
            sorted((float(x), float(y)) for x, y in pts if math.isfinite(x) and math.isfinite(y))
        )
        for name, pts in series.items()
    }
    clean = {name: pts for name, pts in clean.items() if pts}
    if not clean:
        return f'<p class="note">{esc(title)}: nothing logged.</p>'
    frame = chart_geometry.Frame(width, height, *chart_geometry.axis_ranges(clean.values()))
    parts = _chart_axes(frame, title, x_label, y_label)
    legend_x = frame.left
    for i, (name, pts) in enumerate(clean.items()):
        parts += _chart_series(frame, name, pts, COLORS[i % len(COLORS)], legend_x)
        legend_x += 28 + 6.5 * len(name)
    parts.append("</svg>")
    return f'<div class="chart">{"".join(parts)}</div>'


def _chart_axes(frame: chart_geometry.Frame, title: str, x_label: str, y_label: str) -> list[str]:
    """The chart's opening SVG: its title, plot box, grid lines, ticks and axis labels."""
    width, height, left, top = frame.width, frame.height, frame.left, frame.top
    plot_w, plot_h = frame.plot_w, frame.plot_h
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{esc(title)}" font-size="11" '
        f'font-family="sans-serif">',
        f'<text x="{width / 2:.1f}" y="16" text-anchor="middle" font-size="13" font-weight="bold">'
        f"{esc(title)}</text>",
        f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" '
        'fill="none" stroke="#999"/>',
    ]
    for tick in chart_geometry.nice_ticks(*frame.y_range):
        y = frame.sy(tick)
        parts.append(
            f'<line x1="{left}" y1="{y:.1f}" x2="{left + plot_w}" y2="{y:.1f}" stroke="#eee"/>'
            f'<text x="{left - 4}" y="{y + 4:.1f}" text-anchor="end">{esc(f"{tick:.4g}")}</text>'
        )
    for tick in chart_geometry.nice_ticks(*frame.x_range):
        x = frame.sx(tick)
        parts.append(
            f'<line x1="{x:.1f}" y1="{top + plot_h}" x2="{x:.1f}" y2="{top + plot_h + 4}" '
            'stroke="#999"/>'
            f'<text x="{x:.1f}" y="{top + plot_h + 16}" '
            f'text-anchor="middle">{esc(f"{tick:.6g}")}</text>'
        )
    parts.append(
        f'<text x="{left + plot_w / 2:.1f}" y="{height - 6}" '
        f'text-anchor="middle">{esc(x_label)}</text>'
    )
    if y_label:
        parts.append(
            f'<text x="12" y="{top + plot_h / 2:.1f}" text-anchor="middle" '
            f'transform="rotate(-90 12 {top + plot_h / 2:.1f})">{esc(y_label)}</text>'
        )
    return parts


def _chart_series(
    frame: chart_geometry.Frame, name: str, pts: Points, color: str, legend_x: float
) -> list[str]:
    """One series' SVG: its line, its points (when few enough to show), its legend entry."""
    parts = []
    if len(pts) > 1:
        coords = " ".join(f"{frame.sx(x):.1f},{frame.sy(y):.1f}" for x, y in pts)
        parts.append(
            f'<polyline fill="none" stroke="{color}" stroke-width="1.8" points="{coords}">'
            f"<title>{esc(name)}</title></polyline>"
        )
    if len(pts) <= 60:
        parts.extend(
            f'<circle cx="{frame.sx(x):.1f}" cy="{frame.sy(y):.1f}" r="2.5" fill="{color}">'
            f"<title>{esc(name)}: {esc(fmt(x))}, {esc(fmt(y))}</title></circle>"
            for x, y in pts
        )
    parts.append(
        f'<rect x="{legend_x}" y="{frame.top - 12}" width="12" height="3" fill="{color}"/>'
        f'<text x="{legend_x + 16}" y="{frame.top - 8}">{esc(name)}</text>'
    )
    return parts


def _tag_order(tag: str) -> tuple[int, str]:
    bare = tag.removeprefix("epoch_").removeprefix("batch_")
    return (0 if "loss" in bare else 1, tag)


def curves(log_dir: str, skip_runs: Sequence[str] = ("final",)) -> str:
    """One chart per logged scalar tag (lines: the runs, e.g. train and validation), loss first.

    Args:
      log_dir: the run's TensorBoard log directory.
      skip_runs: runs (subdirectories) left out.

    Returns:
      The charts' HTML, or a note saying how to get curves.
    """
    scalars = read_scalars(log_dir)
    charts = []
    for tag in sorted(scalars, key=_tag_order):
        series = {run: pts for run, pts in sorted(scalars[tag].items()) if run not in skip_runs}
        if not series:
            continue
        x_label = "epoch" if tag.startswith("epoch_") else "step"
        charts.append(line_chart(tag.removeprefix("epoch_"), series, x_label=x_label))
    if not charts:
        return (
            '<p class="note">No curves: the run logged no TensorBoard scalars under '
            f"{esc(log_dir)}. Add keras.callbacks.TensorBoard(log_dir=fn_args.model_run_dir) to "
            "model.fit to get them.</p>"
        )
    return f'<div class="charts">{"".join(charts)}</div>'


def page(title: str, sections: Sequence[tuple[str, str]], subtitle: str = "") -> str:
    """A complete HTML document: `title`, then each (heading, already-built HTML body) section."""
    body = "".join(f"<h2>{esc(heading)}</h2>{content}" for heading, content in sections)
    sub = f'<div class="sub">{esc(subtitle)}</div>' if subtitle else ""
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{esc(title)}</title>'
        f"<style>{_CSS}</style></head><body><h1>{esc(title)}</h1>{sub}{body}</body></html>\n"
    )


def write(path: str, document: str) -> None:
    """Write `document` to `path` whole (a temporary sibling, then a rename)."""
    from generic_trainer.artifacts import storage

    storage.write_file_atomic(path, document)


def now_utc() -> str:
    """The time now, as the reports' subtitles show it."""
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
