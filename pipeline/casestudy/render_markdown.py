"""The same page as GitHub-flavoured Markdown (``README.md`` beside ``index.html``)."""

from __future__ import annotations

from .doc import Block, Bullets, Code, Document, Figure, Heading, Inline, Note, Para, Strong, Table, join_inline


def _text(s: str) -> str:
    """Escape what Markdown would read as markup in plain text."""
    return s.replace("\\", "\\\\").replace("*", "\\*").replace("<", "&lt;")


def _code(p: Code) -> str:
    fence = "``" if "`" in p.text else "`"
    return f"{fence}{p.text}{fence}"


def _strong(p: Strong) -> str:
    core = p.text.rstrip()  # no space inside the markers, or CommonMark does not see the emphasis
    return f"**{_text(core)}**{p.text[len(core) :]}"


def inline(parts: tuple[Inline, ...]) -> str:
    return join_inline(parts, _text, _code, _strong, lambda p: f"[{_text(p.text)}]({p.href})")


def _cell(s: str) -> str:
    return _text(s).replace("|", "\\|").replace("\n", " ")


def _table(t: Table) -> str:
    def rule(i: int) -> str:
        return "---:" if i < len(t.numeric) and t.numeric[i] else "---"

    lines = [
        "| " + " | ".join(_cell(c) for c in t.columns) + " |",
        "|" + "|".join(rule(i) for i in range(len(t.columns))) + "|",
    ]
    lines += ["| " + " | ".join(_cell(v) for v in r) + " |" for r in t.rows]
    if t.caption:
        lines += ["", f"_{_text(t.caption)}_"]
    return "\n".join(lines)


def block(b: Block) -> str:
    if isinstance(b, Heading):
        return f"{'#' * b.level} {_text(b.text)}"
    if isinstance(b, Para):
        return inline(b.parts)
    if isinstance(b, Note):
        return f"> **Note:** {inline(b.parts)}"
    if isinstance(b, Bullets):
        return "\n".join(f"- {inline(item)}" for item in b.items)
    if isinstance(b, Table):
        return _table(b)
    if isinstance(b, Figure):
        alt = b.alt.replace("[", "(").replace("]", ")")
        return f"![{alt}]({b.file})\n\n{inline(b.caption)}"
    raise TypeError(f"no Markdown for {type(b).__name__}")


def render_markdown(doc: Document) -> str:
    blocks = [f"# {_text(doc.title)}", inline(doc.subtitle)]
    blocks += [inline(c) for c in doc.credits]
    blocks += [block(b) for b in doc.lead]
    blocks += [block(b) for b in doc.headline]
    blocks += [block(b) for b in doc.body]
    return "\n\n".join(blocks) + "\n"
