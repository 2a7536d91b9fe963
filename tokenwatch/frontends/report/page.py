"""The HTML page around the charts: one self-contained file, light and dark, no network fetch.

Light or dark follows ``prefers-color-scheme``; the toggle button (a few lines of inline script)
overrides it and remembers the choice; ``#theme=dark`` / ``#theme=light`` in the URL forces one
(used to screenshot both). Fonts are the system's: nothing is downloaded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from tokenwatch.frontends.report.svg import esc

_PALETTE_LIGHT = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2"]
_PALETTE_DARK = ["#5fa8e8", "#ff6b6b", "#5fd35f", "#c39bf0", "#ffae50", "#4fd8e8", "#c99a85", "#f59ad6"]


def _palette(colors: list[str]) -> str:
    return "".join(f"--c{i}:{c};" for i, c in enumerate(colors))


_LIGHT_VARS = (
    "--bg:#ffffff;--fg:#1b1f24;--muted:#5b6470;--grid:#e3e7ec;--panel:#f5f7fa;--border:#d5dae1;"
    "--node:#9aa5b1;--ref:#5b6470;--good:#1a7f37;--bad:#c62828;" + _palette(_PALETTE_LIGHT)
)
_DARK_VARS = (
    "--bg:#0f1318;--fg:#e6e9ee;--muted:#9aa4b0;--grid:#262d36;--panel:#161b22;--border:#2f3742;"
    "--node:#55606d;--ref:#aab4c0;--good:#4ac26b;--bad:#ff7b72;" + _palette(_PALETTE_DARK)
)

CSS = (
    f":root{{{_LIGHT_VARS}color-scheme:light}}"
    f"@media (prefers-color-scheme: dark){{:root:not([data-theme=light]){{{_DARK_VARS}color-scheme:dark}}}}"
    f":root[data-theme=dark]{{{_DARK_VARS}color-scheme:dark}}"
    ":root[data-theme=light]{color-scheme:light}"
    "*{box-sizing:border-box}"
    "body{margin:0;background:var(--bg);color:var(--fg);"
    "font:15px/1.5 system-ui,-apple-system,'Segoe UI',Roboto,'Helvetica Neue',Arial,sans-serif}"
    "main{max-width:1000px;margin:0 auto;padding:24px 20px 60px}"
    "header.top{display:flex;justify-content:space-between;align-items:flex-start;gap:16px}"
    "h1{font-size:26px;margin:0 0 4px}h2{font-size:20px;margin:36px 0 8px;"
    "border-bottom:1px solid var(--border);padding-bottom:4px}h3{font-size:16px;margin:20px 0 6px}"
    ".sub{color:var(--muted);margin:0}p.note{color:var(--muted);font-size:13px;margin:4px 0 10px}"
    "button.theme{background:var(--panel);color:var(--fg);border:1px solid var(--border);"
    "border-radius:6px;padding:6px 10px;cursor:pointer;font:inherit;font-size:13px;white-space:nowrap}"
    "table{border-collapse:collapse;margin:8px 0 12px;font-variant-numeric:tabular-nums;font-size:14px}"
    "th,td{padding:4px 12px;border-bottom:1px solid var(--border);text-align:right}"
    "th:first-child,td:first-child{text-align:left}thead th{color:var(--muted);font-weight:600}"
    "tr.key td{font-weight:700}td.good{color:var(--good)}td.bad{color:var(--bad)}"
    ".cards{display:grid;grid-template-columns:repeat(auto-fit,minmax(170px,1fr));gap:10px;margin:16px 0}"
    ".card{background:var(--panel);border:1px solid var(--border);border-radius:8px;padding:10px 12px}"
    ".card .v{font-size:22px;font-weight:700;font-variant-numeric:tabular-nums}"
    ".card .k{color:var(--muted);font-size:12px;text-transform:uppercase;letter-spacing:.04em}"
    ".card.flagged{border-color:var(--bad)}.card .flag{color:var(--bad);font-size:12px}"
    "figure.chart{margin:14px 0 22px;background:var(--panel);border:1px solid var(--border);"
    "border-radius:8px;padding:8px 8px 4px}"
    "figure.chart figcaption{font-weight:600;margin:2px 6px 2px}"
    "figure.chart p.note{margin:0 6px 4px}"
    "svg.chart-svg{width:100%;height:auto;display:block}"
    "svg text{fill:var(--fg);font-size:12px;font-family:inherit}"
    "svg .axis-label{fill:var(--muted);font-size:12px}svg .ref-label{fill:var(--ref);font-size:11px}"
    "svg .grid line{stroke:var(--grid);stroke-width:1}svg .axis line{stroke:var(--muted);stroke-width:1}"
    "svg .ref{stroke:var(--ref);stroke-width:1.5}svg .muted{stroke:var(--node);opacity:.75}"
    + "".join(f"svg .s{i}{{stroke:var(--c{i})}}svg .f{i}{{fill:var(--c{i})}}" for i in range(8))
    + "svg .fmuted{fill:var(--node)}svg .fbad{fill:var(--bad)}svg .fgood{fill:var(--good)}"
    "svg line.muted,svg line.s0,svg line.s1,svg line.s2,svg line.s3{stroke-width:2.5}"
    "svg rect.muted{fill:var(--node)}"
    "dl.prov{display:grid;grid-template-columns:max-content 1fr;gap:2px 16px;font-size:14px}"
    "dl.prov dt{color:var(--muted)}"
    "dl.prov dd{margin:0;word-break:break-all;font-family:ui-monospace,monospace}"
    ".warn{background:var(--panel);border-left:3px solid var(--bad);padding:6px 10px;margin:8px 0;"
    "font-size:13px}"
    "@media print{button.theme{display:none}}"
)

# Applies the theme before first paint: URL fragment, then the stored choice, else the system's.
_THEME_SCRIPT = (
    "(function(){var r=document.documentElement,m=/theme=(dark|light)/.exec(location.hash),s=null;"
    "try{s=localStorage.getItem('tokenwatch-theme')}catch(e){}"
    "var t=m?m[1]:s;if(t)r.setAttribute('data-theme',t);"
    "window.twToggleTheme=function(){var cur=r.getAttribute('data-theme')||"
    "(matchMedia('(prefers-color-scheme: dark)').matches?'dark':'light');"
    "var next=cur==='dark'?'light':'dark';r.setAttribute('data-theme',next);"
    "try{localStorage.setItem('tokenwatch-theme',next)}catch(e){}};})();"
)


def page(title: str, subtitle: str, body: Sequence[str]) -> str:
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        '<meta name="generator" content="tokenwatch">'
        f"<title>{esc(title)}</title><style>{CSS}</style><script>{_THEME_SCRIPT}</script></head>"
        f'<body><main><header class="top"><div><h1>{esc(title)}</h1><p class="sub">{esc(subtitle)}</p></div>'
        '<button class="theme" type="button" onclick="twToggleTheme()" '
        'title="Switch between light and dark">◐ light / dark</button></header>'
        + "".join(body)
        + "</main></body></html>\n"
    )


def figure(chart_id: str, caption: str, svg: str, note: str = "") -> str:
    note_html = f'<p class="note">{esc(note)}</p>' if note else ""
    return (
        f'<figure class="chart" id="{esc(chart_id)}" data-chart="{esc(chart_id)}">'
        f"<figcaption>{esc(caption)}</figcaption>{note_html}{svg}</figure>"
    )


def table(
    head: Sequence[str],
    rows: Sequence[Sequence[str]],
    row_classes: Sequence[str] = (),
    cell_classes: Sequence[Sequence[str]] = (),
    table_id: str = "",
) -> str:
    id_attr = f' id="{esc(table_id)}"' if table_id else ""
    out = [f"<table{id_attr}><thead><tr>", *(f"<th>{esc(h)}</th>" for h in head), "</tr></thead><tbody>"]
    for i, row in enumerate(rows):
        css = row_classes[i] if i < len(row_classes) and row_classes[i] else ""
        out.append(f'<tr class="{css}">' if css else "<tr>")
        cells = cell_classes[i] if i < len(cell_classes) else ()
        for j, cell in enumerate(row):
            cc = cells[j] if j < len(cells) and cells[j] else ""
            out.append(f'<td class="{cc}">{esc(cell)}</td>' if cc else f"<td>{esc(cell)}</td>")
        out.append("</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def section(section_id: str, title: str, *parts: str) -> str:
    return f'<section id="{esc(section_id)}"><h2>{esc(title)}</h2>{"".join(parts)}</section>'


def cards(items: Sequence[tuple[str, str]], flags: Mapping[str, str] | None = None) -> str:
    """Headline figures, (label, value) each; ``flags``: by label, a line under a figure that covers less
    than it seems to (a partial run), drawn in the warning colour with the card's border."""
    flags = flags or {}
    inner = "".join(
        f'<div class="card{" flagged" if k in flags else ""}"><div class="k">{esc(k)}</div>'
        f'<div class="v">{esc(v)}</div>'
        + (f'<div class="flag">{esc(flags[k])}</div>' if k in flags else "")
        + "</div>"
        for k, v in items
    )
    return f'<div class="cards">{inner}</div>'


def note(text: str) -> str:
    return f'<p class="note">{esc(text)}</p>'


def warning_box(text: str) -> str:
    return f'<div class="warn">{esc(text)}</div>'
