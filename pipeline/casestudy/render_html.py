"""The page as one static HTML file: inline CSS, figures as SVG files beside it, nothing fetched.

Readable on a phone (fluid width, tables that wrap long keys) and in a
terminal browser (real headings, paragraphs, tables, alt text on every image).
"""

from __future__ import annotations

import re
from html import escape

from .doc import Block, Bullets, Document, Figure, Heading, Inline, Note, Para, Table, join_inline

CSS = """
:root{color-scheme:light}
*{box-sizing:border-box}
body{margin:0;font:16px/1.55 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;
color:#1a1a1a;background:#fff}
main{max-width:50rem;margin:0 auto;padding:1rem 1rem 3rem}
h1{font-size:1.65rem;line-height:1.25;margin:.5rem 0 .25rem}
h2{font-size:1.25rem;line-height:1.3;margin:2.2rem 0 .6rem;padding-bottom:.2rem;border-bottom:1px solid #ddd}
h3{font-size:1.05rem;margin:1.4rem 0 .4rem}
h4{font-size:1rem;margin:1rem 0 .3rem}
p,li{overflow-wrap:anywhere}
.subtitle{color:#555;margin-top:0}
.credits{font-size:.95rem;background:#f5f7fa;border:1px solid #e1e5eb;border-radius:6px;padding:.5rem .8rem}
.credits p{margin:.2rem 0}
.lead h2{margin-top:1.2rem}
.headline{border-top:3px solid #1b5e20;margin-top:1.6rem;padding-top:.4rem}
.headline p{font-size:1.07rem}
.note{border-left:4px solid #b71c1c;background:#fdecea;padding:.55rem .8rem;margin:1rem 0;border-radius:0 6px 6px 0}
code{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:.88em;background:#f3f3f3;
padding:0 .2em;border-radius:3px;overflow-wrap:anywhere}
.table{overflow-x:auto;margin:.8rem 0}
table{border-collapse:collapse;width:100%;font-size:.9rem}
caption{caption-side:bottom;text-align:left;color:#555;font-size:.85rem;padding-top:.3rem}
th,td{padding:.35rem .45rem;border-bottom:1px solid #e5e5e5;text-align:left;vertical-align:top}
td{overflow-wrap:anywhere}
td:first-child{overflow-wrap:break-word}
th{background:#f5f5f5;font-weight:600;hyphens:auto}
.num{text-align:right;font-variant-numeric:tabular-nums}
td.num,td.nw{white-space:nowrap}
figure{margin:1.2rem 0}
figure img{display:block;width:100%;max-width:38rem;height:auto;margin:0 auto;border:1px solid #eee}
figcaption{font-size:.85rem;color:#444;margin-top:.4rem}
a{color:#0b57d0}
@media (max-width:36rem){body{font-size:15px}main{padding:.75rem}table{font-size:.85rem}th,td{padding:.3rem .25rem}
/* wide tables become one card per row on a phone: each cell says its column */
table.wide,table.wide tbody,table.wide tr,table.wide td{display:block;width:100%}
table.wide{display:flex;flex-direction:column}table.wide caption{order:1}
table.wide thead{position:absolute;left:-9999px}
table.wide tr{border:1px solid #ddd;border-radius:6px;margin:0 0 .6rem;padding:.2rem .5rem}
table.wide td{border:0;padding:.1rem 0;text-align:left;white-space:normal;line-height:1.35;
overflow-wrap:anywhere}
table.wide td:empty{display:none}
table.wide td[data-label]::before{content:attr(data-label) ": ";font-weight:600;color:#444}
table.wide caption{display:block}}
""".strip()


def inline(parts: tuple[Inline, ...]) -> str:
    return join_inline(
        parts,
        escape,
        lambda p: f"<code>{escape(p.text)}</code>",
        lambda p: f"<strong>{escape(p.text)}</strong>",
        lambda p: f'<a href="{escape(p.href)}">{escape(p.text)}</a>',
    )


#: The widest table a 390 px phone shows whole, in widths of a letter of its .85rem text (about 352 px of text
#: column at about 6.8 px a letter): wider ones become cards there. Measured in headless Chromium; a misjudged
#: table still scrolls sideways inside its wrapper rather than being cut off.
PHONE_LETTERS = 52
#: A cell that is one number (``$0.000001``, ``-0.40``, ``65.0%``, ``1,234``): it never wraps inside.
NUMBER = re.compile(r"[-+]?\$?\d[\d.,]*%?")


def _nowrap(t: Table, i: int, value: str) -> bool:
    return (i < len(t.numeric) and t.numeric[i]) or NUMBER.fullmatch(value) is not None


def _letters(text: str, bold: bool = False) -> float:
    """The width of ``text`` in letters: digits and signs are wider, spaces narrower, bold a quarter wider."""
    width = sum(1.2 if c.isdigit() or c in "$%+-" else 0.5 if c == " " else 1.0 for c in text)
    return width * (1.25 if bold else 1.0)


def narrowest(t: Table) -> float:
    """The table's narrowest width in letters: per column its widest piece that cannot wrap (a bold header word,
    a number, a first-column word up to a hyphen before a letter; other text wraps anywhere but reads badly
    under 8 letters), plus one for the cell padding."""
    width = 0.0
    for i, column in enumerate(t.columns):
        pieces = [_letters(w, bold=True) for w in column.split()]
        for row in t.rows:
            value = row[i]
            if _nowrap(t, i, value):
                pieces.append(_letters(value))
            elif i == 0:  # the first column wraps between words and after a hyphen followed by a letter
                pieces += [_letters(w) for w in re.split(r"\s+|(?<=-)(?=[^\d\s])", value)]
            else:
                pieces += [_letters(w[:8]) for w in value.split()]
        width += max(pieces, default=0.0) + 1
    return width


def _table(t: Table) -> str:
    def cls(i: int, value: str | None = None) -> str:
        names = ["num"] if i < len(t.numeric) and t.numeric[i] else []
        if value is not None and not names and _nowrap(t, i, value):
            names.append("nw")
        return f' class="{" ".join(names)}"' if names else ""

    def label(i: int) -> str:  # a card names each cell's column; a column without a header adds no label
        return f' data-label="{escape(t.columns[i], quote=True)}"' if t.columns[i] else ""

    head = "".join(f'<th scope="col"{cls(i)}>{escape(c)}</th>' for i, c in enumerate(t.columns))
    rows = "".join(
        "<tr>" + "".join(f"<td{cls(i, v)}{label(i)}>{escape(v)}</td>" for i, v in enumerate(r)) + "</tr>\n"
        for r in t.rows
    )
    caption = f"<caption>{escape(t.caption)}</caption>" if t.caption else ""
    # more than four columns, or too wide at its narrowest, does not fit a phone's width: one card per row there
    wide = ' class="wide"' if len(t.columns) > 4 or narrowest(t) > PHONE_LETTERS else ""
    return (
        f'<div class="table"><table{wide}>{caption}\n<thead><tr>{head}</tr></thead>\n<tbody>\n{rows}'
        "</tbody></table></div>"
    )


def block(b: Block) -> str:
    if isinstance(b, Heading):
        anchor = f' id="{escape(b.anchor)}"' if b.anchor else ""
        return f"<h{b.level}{anchor}>{escape(b.text)}</h{b.level}>"
    if isinstance(b, Para):
        return f"<p>{inline(b.parts)}</p>"
    if isinstance(b, Note):
        return f'<p class="note" role="note"><strong>Note:</strong> {inline(b.parts)}</p>'
    if isinstance(b, Bullets):
        return "<ul>\n" + "".join(f"<li>{inline(item)}</li>\n" for item in b.items) + "</ul>"
    if isinstance(b, Table):
        return _table(b)
    if isinstance(b, Figure):
        return (
            f'<figure><img src="{escape(b.file)}" alt="{escape(b.alt)}" loading="lazy">\n'
            f"<figcaption>{inline(b.caption)}</figcaption></figure>"
        )
    raise TypeError(f"no HTML for {type(b).__name__}")


def render_html(doc: Document) -> str:
    credits = ""
    if doc.credits:
        credits = '<div class="credits">' + "".join(f"<p>{inline(c)}</p>" for c in doc.credits) + "</div>\n"
    parts = [
        "<!doctype html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{escape(doc.title)}</title>",
        f"<style>\n{CSS}\n</style>",
        "</head>",
        "<body><main>",
        f"<h1>{escape(doc.title)}</h1>",
        f'<p class="subtitle">{inline(doc.subtitle)}</p>',
        credits + '<section class="lead" aria-label="What the dispatcher will do">',
        *(block(b) for b in doc.lead),
        "</section>",
        '<section class="headline" aria-label="Headline">',
        *(block(b) for b in doc.headline),
        "</section>",
        *(block(b) for b in doc.body),
        "</main></body>",
        "</html>",
    ]
    return "\n".join(parts) + "\n"
