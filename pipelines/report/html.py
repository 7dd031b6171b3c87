"""The report page: one self-contained HTML file (inline CSS, inline SVG, no script, no
external resource), with a provenance block naming the data it was built from."""
from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from pathlib import Path

from pipelines.report.svg import esc

CSS = """
body { font: 14px/1.45 system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif; color: #222; margin: 0;
       background: #fff; }
header { background: #1f2933; color: #f5f7fa; padding: 16px 28px; }
header h1 { margin: 0 0 4px 0; font-size: 22px; }
header .sub { color: #cbd2d9; }
nav { padding: 8px 28px; border-bottom: 1px solid #ddd; background: #f5f7fa; position: sticky; top: 0; }
nav a { margin-right: 14px; color: #0b5394; text-decoration: none; }
main { padding: 8px 28px 40px 28px; max-width: 1400px; }
section { margin: 22px 0 30px 0; }
h2 { border-bottom: 2px solid #1f2933; padding-bottom: 4px; font-size: 19px; }
h3 { font-size: 15px; margin: 18px 0 6px 0; }
table { border-collapse: collapse; margin: 8px 0 14px 0; font-size: 12.5px; }
th, td { border: 1px solid #d9dee3; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f0f3f6; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.banner { padding: 8px 12px; margin: 10px 0; border-radius: 4px; }
.banner.simulated { background: #fff4e5; border: 1px solid #f0a030; }
.banner.warning { background: #fdecea; border: 1px solid #d55e00; }
.banner.info { background: #eef5fb; border: 1px solid #8ab4d8; }
.empty { color: #666; font-style: italic; }
.chart { display: block; margin: 6px 0 14px 0; max-width: 100%; height: auto; }
.charts { display: flex; flex-wrap: wrap; gap: 18px; }
.provenance td:first-child { font-weight: 600; white-space: nowrap; }
.tag { display: inline-block; padding: 0 6px; border-radius: 3px; font-size: 11.5px; background: #eee; }
.tag.simulated { background: #f0a030; color: #000; }
.tag.regression, .tag.slower { background: #f7c6b5; }
.tag.improvement, .tag.faster { background: #bfe8d6; }
code { font-size: 12px; }
"""


@dataclass
class Section:
    id: str
    title: str
    body: str


@dataclass
class Page:
    title: str
    subtitle: str
    provenance: list[tuple[str, str]]          # (name, HTML value), already escaped
    banners: list[str] = field(default_factory=list)
    sections: list[Section] = field(default_factory=list)

    def render(self) -> str:
        nav = "".join(f'<a href="#{esc(s.id)}">{esc(s.title)}</a>' for s in self.sections)
        prov = "".join(f"<tr><td>{esc(k)}</td><td>{v}</td></tr>" for k, v in self.provenance)
        body = "".join(f'<section id="{esc(s.id)}"><h2>{esc(s.title)}</h2>{s.body}</section>' for s in self.sections)
        return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>{esc(self.title)}"
                f"</title><style>{CSS}</style></head><body>"
                f"<header><h1>{esc(self.title)}</h1><div class=\"sub\">{esc(self.subtitle)}</div></header>"
                f"<nav>{nav}</nav><main>{''.join(self.banners)}"
                f'<section id="provenance"><h2>Data this report was built from</h2>'
                f'<table class="provenance">{prov}</table></section>{body}</main></body></html>\n')


def table(columns: list[str], rows: list[list], *, cls: str = "", id_: str = "", numeric: set[str] = frozenset(),
          raw: set[str] = frozenset()) -> str:
    """An HTML table; values escaped unless their column is in `raw` (pre-built HTML)."""
    head = "".join(f"<th>{esc(c)}</th>" for c in columns)
    out = []
    for r in rows:
        cells = []
        for c, v in zip(columns, r):
            val = ("" if v is None else str(v)) if c in raw else esc(v)
            cells.append(f'<td class="num">{val}</td>' if c in numeric else f"<td>{val}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    attrs = (f' id="{esc(id_)}"' if id_ else "") + (f' class="{esc(cls)}"' if cls else "")
    return f"<table{attrs}><thead><tr>{head}</tr></thead><tbody>{''.join(out)}</tbody></table>"


def empty(message: str, cls: str = "") -> str:
    return f'<p class="empty {esc(cls)}">{esc(message)}</p>'


def banner(kind: str, html_text: str, id_: str = "") -> str:
    attr = f' id="{esc(id_)}"' if id_ else ""
    return f'<div class="banner {esc(kind)}"{attr}>{html_text}</div>'


def tag(text: str, kind: str = "") -> str:
    return f'<span class="tag {esc(kind)}">{esc(text)}</span>'


def write(html_text: str, path: Path) -> Path:
    """Write the page atomically (a reader never sees half a report)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(html_text, encoding="utf-8")
    tmp.replace(path)
    return path


def utc_now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
