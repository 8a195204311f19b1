"""The report as one self-contained HTML page: Plotly's JavaScript is inlined once, every figure is
a div drawn by it, so the page opens anywhere without a network."""

from __future__ import annotations

import datetime
import html

from amqpcap import __version__
from amqpcap.report.charts import nice_number
from amqpcap.report.model import Header, Link, Section, Table

PLOT_CONFIG = {"displaylogo": False, "responsive": True}

STYLE = """
* { box-sizing: border-box; }
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 0; color: #222; background: #fafafa; }
header, main, nav, footer { max-width: 1280px; margin: 0 auto; padding: 0 24px; }
header { padding-top: 16px; }
h1 { font-size: 24px; margin: 8px 0; }
h2 { font-size: 19px; margin: 0 0 4px; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 2px 16px; margin: 8px 0; }
dl.facts dt { color: #666; } dl.facts dd { margin: 0; }
.cards { display: flex; flex-wrap: wrap; gap: 10px; margin: 12px 0; }
.card { background: #fff; border: 1px solid #ddd; border-radius: 6px; padding: 8px 14px; min-width: 110px; }
.card b { display: block; font-size: 20px; } .card span { color: #666; font-size: 12px; }
.tables { display: flex; flex-wrap: wrap; gap: 24px; align-items: flex-start; }
nav { position: sticky; top: 0; background: #fafafa; border-bottom: 1px solid #ddd; padding: 6px 24px; z-index: 10;
      display: flex; flex-wrap: wrap; gap: 2px 14px; }
nav a { font-size: 13px; color: #1f5fa8; text-decoration: none; white-space: nowrap; }
section { background: #fff; border: 1px solid #ddd; border-radius: 6px; padding: 14px 18px; margin: 16px 0; }
p.read { color: #555; margin: 0 0 8px; font-size: 13px; }
p.note { margin: 6px 0; font-size: 13px; } p.nothing { color: #888; font-style: italic; }
table { border-collapse: collapse; font-size: 12px; margin: 8px 0; }
caption { text-align: left; color: #666; padding-bottom: 2px; }
th, td { border-bottom: 1px solid #eee; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f3f3f3; } td.n { text-align: right; font-variant-numeric: tabular-nums; }
/* Fixed shares: Plotly sizes a plot when its script runs, before the next plot of its row exists. */
.row { display: flex; gap: 12px; } .row > div { flex: 0 0 calc((100% - 12px) / 2); min-width: 0; }
.table-wrap { max-height: 420px; overflow: auto; }
footer { color: #888; font-size: 12px; padding-bottom: 24px; }
"""


def render(header: Header, sections: list[Section]) -> str:
    from plotly.offline import get_plotlyjs
    # An inline script ends at the first "</script": keep the library from ever closing it early.
    plotly_js = get_plotlyjs().replace("</script", "<\\/script")
    parts = [
        "<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>amqpcap report: {_e(header.lake)}</title>", f"<style>{STYLE}</style>",
        f'<script type="text/javascript">{plotly_js}</script>', "</head>", "<body>",
        _header(header),
        "<nav>" + "".join(f'<a href="#{s.key}">{_e(s.title)}</a>' for s in sections) + "</nav>",
        "<main>", *(_section(s) for s in sections), "</main>",
        f"<footer>amqpcap {__version__}, report generated {_e(header.generated)}</footer>",
        "</body>", "</html>"]
    return "\n".join(parts)


def _header(h: Header) -> str:
    facts = [("lake", h.lake), ("period", h.period), ("traffic", h.traffic), ("generated", h.generated)]
    cards = "".join(f'<div class="card"><b>{nice_number(v)}</b><span>{_e(k)}</span></div>' for k, v in h.totals)
    return ("<header><h1>AMQP traffic report</h1>"
            '<dl class="facts">' + "".join(f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in facts) + "</dl>"
            f'<div class="cards">{cards}</div>'
            + "".join(f'<p class="note">{_e(n)}</p>' for n in h.notes)
            + f'<div class="tables">{table_html(h.captures)}{table_html(h.runs)}</div></header>')


def _section(s: Section) -> str:
    out = [f'<section id="{s.key}" data-empty="{str(s.empty).lower()}">', f"<h2>{_e(s.title)}</h2>",
           f'<p class="read">{_e(s.how_to_read)}</p>']
    for note in s.notes:
        kind = "note nothing" if s.empty else "note"
        out.append(f'<p class="{kind}">{_e(note)}</p>')
    index = 0
    for entry in s.figures:
        # A tuple of figures is one row of plots side by side.
        row = entry if isinstance(entry, tuple) else (entry,)
        divs = []
        for fig in row:
            divs.append(fig.to_html(full_html=False, include_plotlyjs=False, div_id=f"plot-{s.key}-{index}",
                                    config=PLOT_CONFIG))
            index += 1
        out.append(f'<div class="row">{"".join(divs)}</div>' if len(divs) > 1 else divs[0])
    if s.tables:
        out.append('<div class="tables">' + "".join(table_html(t) for t in s.tables) + "</div>")
    out.append("</section>")
    return "\n".join(out)


def table_html(t: Table) -> str:
    if not t.rows:
        return ""
    caption = f"<caption>{_e(t.caption)}</caption>" if t.caption else ""
    head = "".join(f"<th>{_e(c)}</th>" for c in t.columns)
    body = "".join("<tr>" + "".join(_cell(v) for v in row) + "</tr>" for row in t.rows)
    return f'<div class="table-wrap"><table>{caption}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def _cell(value) -> str:
    if isinstance(value, Link):
        return f'<td><a href="{_e(value.href)}">{_e(value.text)}</a></td>'
    if isinstance(value, bool):
        return f"<td>{'yes' if value else 'no'}</td>"
    if isinstance(value, (int, float)):
        return f'<td class="n">{nice_number(value)}</td>'
    if isinstance(value, datetime.datetime):
        text = value.astimezone(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] if value.tzinfo \
            else value.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
        return f"<td>{text}</td>"
    return f"<td>{_e('' if value is None else value)}</td>"


def _e(value) -> str:
    return html.escape(str(value))
