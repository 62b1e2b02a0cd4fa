"""One SVG line chart per test: requests/s of each server over the levels."""

from .catalog import TESTS
from .summary import summarize
from .workload import PIPELINE_DEPTH


SERIES_COLOURS = ["#1f6fb4", "#d9480f", "#2b8a3e", "#862e9c", "#c2255c", "#495057"]


def nice_ceiling(value):
    """The smallest 1, 2, 2.5 or 5 times a power of ten that is >= value (and > 0)."""
    if value <= 0:
        return 1
    magnitude = 10 ** (len(str(int(value))) - 1) if value >= 1 else 1
    for step in (1, 2, 2.5, 5, 10):
        if step * magnitude >= value:
            return step * magnitude
    return 10 * magnitude


def short_number(value):
    for limit, suffix in ((1e6, "M"), (1e3, "k")):
        if value >= limit:
            text = f"{value / limit:.2f}".rstrip("0").rstrip(".")
            return f"{text}{suffix}"
    return f"{value:g}"


def xml_escape(text):
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def render_svg(title, x_label, levels, series):
    """A line chart: levels evenly spaced on x, requests/s on y from 0, one line per series.

    `series` is a list of (name, [value or None per level]).
    """
    width, height = 640, 380
    left, right, top, bottom = 80, 20, 50, 60
    plot_w, plot_h = width - left - right, height - top - bottom
    values = [v for _, vs in series for v in vs if v is not None]
    y_max = nice_ceiling(max(values, default=1) * 1.05)

    def x_at(i):
        return left + (plot_w * (i + 0.5) / len(levels))

    def y_at(v):
        return top + plot_h * (1 - v / y_max)

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{width / 2}" y="22" text-anchor="middle" font-size="15">{xml_escape(title)}</text>',
    ]
    ticks = 5
    for k in range(ticks + 1):
        v = y_max * k / ticks
        y = y_at(v)
        out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{width - right}" y2="{y:.1f}" stroke="#e0e0e0"/>')
        out.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{short_number(v)}</text>')
    out.append(
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + plot_h}" stroke="#444"/>'
        f'<line x1="{left}" y1="{top + plot_h}" x2="{width - right}" y2="{top + plot_h}" stroke="#444"/>'
    )
    for i, level in enumerate(levels):
        out.append(f'<text x="{x_at(i):.1f}" y="{top + plot_h + 18}" text-anchor="middle">{xml_escape(level)}</text>')
    out.append(f'<text x="{left + plot_w / 2}" y="{height - 15}" text-anchor="middle">{xml_escape(x_label)}</text>')
    out.append(
        f'<text x="18" y="{top + plot_h / 2}" text-anchor="middle" '
        f'transform="rotate(-90 18 {top + plot_h / 2})">requests/s</text>'
    )
    for n, (name, vs) in enumerate(series):
        colour = SERIES_COLOURS[n % len(SERIES_COLOURS)]
        points = [(x_at(i), y_at(v)) for i, v in enumerate(vs) if v is not None]
        if len(points) > 1:
            path = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
            out.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"/>')
        for x, y in points:
            out.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3.5" fill="{colour}"/>')
        # Legend in a row between the title and the plot, where no line can hide it.
        legend_x = left + min(200, plot_w // max(len(series), 1)) * n
        out.append(
            f'<rect x="{legend_x}" y="30" width="12" height="12" fill="{colour}"/>'
            f'<text x="{legend_x + 18}" y="40">{xml_escape(name)}</text>'
        )
    out.append("</svg>")
    return "\n".join(out) + "\n"


def chart_for(record, names):
    test = TESTS[record["test"]]
    rows = summarize(record)
    series = [(name, [rows[(name, lv)]["rps_median"] if (name, lv) in rows else None for lv in record["levels"]])
              for name in names if name in record["servers"]]  # fmt: skip
    if test.kind == "queries":
        connections = next(row["connections"] for row in rows.values())
        x_label = f"queries per request (N), {connections} connections"
    elif test.kind == "pipelined":
        x_label = f"connections ({PIPELINE_DEPTH} requests pipelined)"
    else:
        x_label = "connections"
    return render_svg(f"{test.name}: requests/s", x_label, record["levels"], series)
