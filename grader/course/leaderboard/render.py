"""The public page: index.html rendered from the site's data, which it also embeds as JSON."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape

from grader.course.leaderboard.inputs import LeaderboardError
from grader.course.leaderboard.ranking import timestamp
from grader.engine.records.files import TEMPLATES, write_atomic

TEMPLATE = "leaderboard.html.j2"
CHART_STUDENTS = 15  # bars per problem chart, besides the reference and PyTorch


def embed_json(data: Any) -> str:
    """JSON safe inside <script>: no '<', '>' or '&' can end the element or open a comment."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def fmt_points(x: float | None) -> str:
    return "–" if x is None else f"{round(x, 2):g}"


def fmt_speedup(x: float | None) -> str:
    return "not measured" if x is None else f"×{x:.2f}"


def fmt_ms(x: float | None) -> str:
    return "–" if x is None else f"{x:.4g}"


def fmt_rate(x: float | None) -> str:
    if x is None:
        return "–"
    return f"{x:,.0f}" if x >= 100 else f"{x:.3g}"


def fmt_when(text: str | None) -> str:
    if not text:
        return "–"
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return text
    if when.tzinfo is not None:
        when = when.astimezone(timezone.utc)
    return when.strftime("%Y-%m-%d %H:%M UTC")


def templates() -> Environment:
    """The grader's templates, HTML-escaped (both pages render from them)."""
    return Environment(loader=FileSystemLoader(TEMPLATES), autoescape=select_autoescape(["html", "j2"]))


def render_html(data: dict[str, Any]) -> str:
    env = templates()
    env.filters.update(
        pts=fmt_points,
        speedup=fmt_speedup,
        ms=fmt_ms,
        rate=fmt_rate,
        when=fmt_when,
        epoch=lambda t: f"{timestamp(t):.0f}" if t else "",
    )
    return env.get_template(TEMPLATE).render(d=data, data_json=embed_json(data), chart_students=CHART_STUDENTS)


def write_site(data: dict[str, Any], out: Path) -> None:
    """leaderboard.json first, then index.html: each atomic, so a reader never sees half a file."""
    if out.exists() and not out.is_dir():
        raise LeaderboardError(f"{out}: exists and is not a folder")
    write_atomic(out / "leaderboard.json", json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    write_atomic(out / "index.html", render_html(data))
