"""A tiny document model rendered both to Markdown and to self-contained HTML.

The report is built once as blocks, so report.md and report.html always say the same thing.
"""

from __future__ import annotations

import base64
import html
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class Heading:
    """A section title."""

    level: int
    text: str


@dataclass(frozen=True, slots=True)
class Para:
    """A paragraph of plain text."""

    text: str


@dataclass(frozen=True, slots=True)
class Bullets:
    """A list; an item may hold several lines."""

    items: tuple[tuple[str, ...], ...]


@dataclass(frozen=True, slots=True)
class Table:
    """Headers and rows of text; columns after the first are right-aligned when numeric."""

    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


@dataclass(frozen=True, slots=True)
class Figure:
    """A PNG chart, written next to report.md and embedded in report.html."""

    name: str
    png: bytes
    caption: str


Block = Heading | Para | Bullets | Table | Figure


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def to_markdown(blocks: list[Block]) -> str:
    """GitHub-flavoured Markdown; figures refer to PNG files of the same folder."""
    out: list[str] = []
    for block in blocks:
        if isinstance(block, Heading):
            out.append(f"{'#' * block.level} {block.text}")
        elif isinstance(block, Para):
            out.append(block.text)
        elif isinstance(block, Bullets):
            out.append("\n".join("- " + "<br>".join(item) for item in block.items))
        elif isinstance(block, Table):
            lines = ["| " + " | ".join(_md_cell(h) for h in block.headers) + " |"]
            lines.append(
                "|" + "|".join(_md_align(block, n) for n in range(len(block.headers))) + "|"
            )
            lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in block.rows]
            out.append("\n".join(lines))
        else:
            out.append(f"![{block.caption}]({block.name})")
    return "\n\n".join(out) + "\n"


def _numeric(block: Table, column: int) -> bool:
    cells = [row[column] for row in block.rows if row[column] not in {"–", ""}]
    return bool(cells) and all(c[:1].isdigit() or c[:1] in "-+." for c in cells)


def _md_align(block: Table, column: int) -> str:
    return "---:" if column and _numeric(block, column) else "---"


_CSS = """
body{font:15px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;
max-width:1150px;padding:0 1rem;color:#1f2328;background:#fff}
h1{font-size:1.7rem;border-bottom:2px solid #d0d7de;padding-bottom:.3rem}
h2{font-size:1.3rem;margin-top:2.2rem;border-bottom:1px solid #d0d7de;padding-bottom:.2rem}
h3{font-size:1.05rem;margin-top:1.5rem}
table{border-collapse:collapse;margin:.6rem 0 1rem;font-size:13.5px}
th,td{border:1px solid #d0d7de;padding:.25rem .55rem;vertical-align:top}
th{background:#f6f8fa;text-align:left}td.num{text-align:right;font-variant-numeric:tabular-nums}
tr:nth-child(even) td{background:#fbfcfd}
td.pass{color:#1a7f37;font-weight:600}td.fail{color:#cf222e;font-weight:600}
td.na{color:#6e7781}
figure{margin:1rem 0}figure img{max-width:100%;border:1px solid #d0d7de}
figcaption{color:#57606a;font-size:13px}li{margin:.25rem 0}
"""


def to_html(blocks: list[Block], title: str) -> str:
    """One HTML file with inline CSS and base64 PNGs: open it anywhere, offline."""
    body: list[str] = []
    for block in blocks:
        if isinstance(block, Heading):
            body.append(f"<h{block.level}>{html.escape(block.text)}</h{block.level}>")
        elif isinstance(block, Para):
            body.append(f"<p>{html.escape(block.text)}</p>")
        elif isinstance(block, Bullets):
            items = "".join(
                "<li>" + "<br>".join(html.escape(line) for line in item) + "</li>"
                for item in block.items
            )
            body.append(f"<ul>{items}</ul>")
        elif isinstance(block, Table):
            body.append(_html_table(block))
        else:
            data = base64.b64encode(block.png).decode("ascii")
            body.append(
                f'<figure><img alt="{html.escape(block.caption)}" '
                f'src="data:image/png;base64,{data}"><figcaption>'
                f"{html.escape(block.caption)}</figcaption></figure>"
            )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title>"
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<style>{_CSS}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n"
    )


def _html_table(block: Table) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in block.headers)
    numeric = [bool(n) and _numeric(block, n) for n in range(len(block.headers))]
    rows = []
    for row in block.rows:
        cells = []
        for n, cell in enumerate(row):
            css = {"pass": "pass", "FAIL": "fail", "n/a": "na"}.get(
                cell, "num" if numeric[n] else ""
            )
            attr = f' class="{css}"' if css else ""
            cells.append(f"<td{attr}>{html.escape(cell)}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def write_figures(blocks: list[Block], folder: Path) -> list[Path]:
    """Write every figure's PNG into folder (for the Markdown report)."""
    paths = []
    for block in blocks:
        if isinstance(block, Figure):
            path = folder / block.name
            path.write_bytes(block.png)
            paths.append(path)
    return paths
