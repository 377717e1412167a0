"""A run comparison as one HTML page: the markdown report's headings, tables and lines, and its plots."""

from __future__ import annotations

import html
from typing import Sequence

STYLE = ("body{font-family:system-ui,sans-serif;margin:2rem;max-width:80rem}table{border-collapse:collapse;"
         "margin:1rem 0}td,th{border:1px solid #ccc;padding:.25rem .5rem;text-align:right}"
         "td:first-child,th:first-child,td:nth-child(2),th:nth-child(2){text-align:left}img{max-width:100%}")


def markdown_page(title: str, markdown: str, images: Sequence[str] = ()) -> str:
    """``markdown`` (headings, pipe tables, plain lines: what the reports write) as a page, with ``images``
    (paths relative to the page) after it."""
    body: list[str] = []
    table: list[list[str]] = []
    for line in markdown.splitlines() + [""]:
        if line.startswith("|"):
            cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
            if not all(set(cell) <= set("-: ") for cell in cells):  # the separator row
                table.append(cells)
            continue
        if table:
            head, *rows = table
            body.append("<table><thead><tr>" + "".join(f"<th>{html.escape(c)}</th>" for c in head) + "</tr></thead>"
                        "<tbody>" + "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>"
                                            for row in rows) + "</tbody></table>")
            table = []
        heading = len(line) - len(line.lstrip("#"))
        if 0 < heading <= 3 and line[heading:heading + 1] == " ":
            body.append(f"<h{heading}>{html.escape(line[heading + 1:])}</h{heading}>")
        elif line.strip():
            body.append(f"<p>{html.escape(line)}</p>")
    body += [f'<p><img src="{html.escape(image)}" alt="{html.escape(image)}"></p>' for image in images]
    return (f"<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title>"
            f"<style>{STYLE}</style></head><body>{''.join(body)}</body></html>\n")
