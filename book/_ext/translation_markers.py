"""Sphinx extension: a translation that starts like a list or a heading is still shown.

Sphinx translates a heading or a paragraph by parsing its translation (the msgstr)
as a small Markdown document of its own, and keeps the result only if it is again a
heading or a paragraph. A translation that starts with "1. " (or "2) ", "- ", "* ",
"+ ", "# ", ">") parses as a list, a heading or a quote, so Sphinx drops it without a
warning and the reader sees the English: 39 headings on 20 Chinese pages did ("2.
Smoothing that spares the padding id", issue 60). Such a start is never meant as
Markdown there (the English of that node is a heading or a paragraph, not a list), so
here its marker is escaped ("1\\. ") before Sphinx parses it: no catalogue needs care,
and one already written "1\\. " is left as it is: the reader sees the translation as
written. Literal blocks are not touched (Sphinx passes them as "::" blocks).

Sphinx offers no hook for a message before it is parsed: the extension wraps
`sphinx.transforms.i18n.publish_msgstr`, which the Locale transform calls for each
message (Sphinx 7). tests/test_chinese_headings.py builds a small book both ways.
"""
from __future__ import annotations

import re

from sphinx.transforms import i18n

# A block marker at a message's start (CommonMark: up to three spaces of indent): an
# ordered list's number and its "." or ")", a bullet, an ATX heading's #s (each of these
# followed by a space, a tab, a line's end or the text's end), or a quote's ">".
_NUMBER = re.compile(r"( {0,3}\d{1,9})([.)])(?=[ \t\n]|$)")
_MARKER = re.compile(r"( {0,3})([-+*]|#{1,6})(?=[ \t\n]|$)|( {0,3})(>)")


def escape_marker(text: str) -> str:
    "The text with a block marker at its start escaped: it parses as plain text."
    if m := _NUMBER.match(text):
        return f"{m[1]}\\{m[2]}{text[m.end():]}"
    if m := _MARKER.match(text):
        indent, marker = (m[1], m[2]) if m[2] else (m[3], m[4])
        return f"{indent}\\{marker}{text[m.end():]}"
    return text


def setup(app):
    publish = i18n.publish_msgstr
    if not getattr(publish, "escapes_markers", False):
        def publish_msgstr(app, source, *args, **kwargs):
            return publish(app, escape_marker(source), *args, **kwargs)
        publish_msgstr.escapes_markers = True
        i18n.publish_msgstr = publish_msgstr
    return {"parallel_read_safe": True, "parallel_write_safe": True}
