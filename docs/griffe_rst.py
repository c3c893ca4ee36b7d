"""A griffe extension (mkdocs.yml, mkdocstrings ``extensions``): the docstrings' reStructuredText blocks as Markdown.

The package's docstrings are Google style with three reStructuredText block forms, which Markdown would print as
text: ``.. math::`` directives, which become ``$$`` blocks for pymdownx.arithmatex, literal blocks introduced
by a paragraph ending in ``::``, which become fenced code blocks, and simple tables (columns under ``====``
rules; a row with an empty first cell continues the row above), which become Markdown tables. The source
files are not changed: this rewrites each object's docstring as griffe loads it, before its sections are parsed.
"""

from __future__ import annotations

import re

import griffe

_RULE = re.compile(r"^ *=+( +=+)+ *$")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _block(lines: list[str], start: int, indent: int) -> tuple[list[str], int, int]:
    """The lines from ``start`` on that are blank or indented deeper than ``indent``, without leading and trailing
    blank lines: those lines dedented, the index after the last one, and their common indentation."""
    end = start
    while end < len(lines) and (not lines[end].strip() or _indent(lines[end]) > indent):
        end += 1
    while end > start and not lines[end - 1].strip():
        end -= 1
    while start < end and not lines[start].strip():
        start += 1
    body = lines[start:end]
    depth = min((_indent(line) for line in body if line.strip()), default=0)
    return [line[depth:] for line in body], end, depth


def _table(lines: list[str], start: int) -> tuple[list[str], int]:
    """The simple table whose top rule is ``lines[start]`` as Markdown lines, and the index after its bottom rule."""
    columns = [m.start() for m in re.finditer(r"=+", lines[start])]
    header: list[str] = []
    rows: list[list[str]] = []
    rules, i = 1, start + 1
    while i < len(lines) and rules < 3:
        if _RULE.match(lines[i]):
            rules += 1
        elif lines[i].strip():
            cells = [lines[i][a:b].strip().replace("|", "\\|") for a, b in zip(columns, [*columns[1:], None])]
            if rules == 1:
                header = [f"{old} {new}".strip() for old, new in zip(header, cells)] if header else cells
            elif rows and not cells[0]:
                rows[-1] = [f"{old} {new}".strip() for old, new in zip(rows[-1], cells)]
            else:
                rows.append(cells)
        i += 1
    pad = " " * columns[0]
    table = [f"| {' | '.join(header)} |", f"|{'---|' * len(header)}", *(f"| {' | '.join(row)} |" for row in rows)]
    return ["", *(pad + row for row in table), ""], i


def markdown(text: str) -> str:
    """``text`` with its ``.. math::`` directives, ``::`` literal blocks and simple tables in Markdown."""
    lines, out, i = text.splitlines(), [], 0
    while i < len(lines):
        line, indent = lines[i], _indent(lines[i])
        pad = " " * indent
        if line.strip().startswith(".. math::"):
            first = line.strip()[len(".. math::") :].strip()
            body, i, _ = _block(lines, i + 1, indent)
            maths = [m for m in [first, *body] if m.strip()]  # a blank line would end the $$ block
            out += ["", f"{pad}$$", *(f"{pad}{m}" for m in maths), f"{pad}$$", ""]
            continue
        if _RULE.match(line):
            table, i = _table(lines, i)
            out += table
            continue
        if line.rstrip().endswith("::") and not line.strip().startswith(".."):
            body, end, depth = _block(lines, i + 1, indent)
            if body:
                head = line.rstrip()[:-2].rstrip()
                # In a Google section (an indented line, or an "Example:" title) the code must stay indented
                # under it; griffe dedents it with the section. At the top level it starts at the margin.
                in_section = indent > 0 or head.strip() in ("Example", "Examples")
                fence = " " * depth if in_section else pad
                out += [f"{head}:" if head.strip() else "", "", f"{fence}```python"]
                out += [f"{fence}{b}" if b.strip() else "" for b in body]
                out += [f"{fence}```"]
                i = end
                continue
        out.append(line)
        i += 1
    return "\n".join(out)


class RstBlocksToMarkdown(griffe.Extension):
    """Rewrites every loaded object's docstring with :func:`markdown`."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: object) -> None:
        if obj.docstring is not None:
            obj.docstring.value = markdown(obj.docstring.value)
