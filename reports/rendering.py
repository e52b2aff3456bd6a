"""Markdown of reports and comments to HTML that is safe to put in a page: Python-Markdown renders, then nh3
(the Ammonia sanitiser) keeps only plain formatting tags and http(s)/mailto links. Raw HTML in the text never
survives as markup: a <script> is dropped with its content, an onclick attribute is dropped, a javascript: link
loses its href."""

from __future__ import annotations

import markdown
import nh3
from django.utils.safestring import SafeString, mark_safe

ALLOWED_TAGS = {
    "p", "br", "hr", "em", "strong", "code", "pre", "blockquote", "ul", "ol", "li", "a",
    "h1", "h2", "h3", "h4", "h5", "h6", "table", "thead", "tbody", "tr", "th", "td", "del",
}  # fmt: skip
ALLOWED_ATTRIBUTES = {"a": {"href", "title"}, "th": {"align"}, "td": {"align"}}
URL_SCHEMES = {"http", "https", "mailto"}


def markdown_render(text: str) -> SafeString:
    """The text as sanitised HTML."""
    html = markdown.markdown(text, extensions=["tables", "fenced_code", "sane_lists"], output_format="html")
    cleaned = nh3.clean(
        html,
        tags=ALLOWED_TAGS,
        attributes=ALLOWED_ATTRIBUTES,
        url_schemes=URL_SCHEMES,
        link_rel="noopener noreferrer nofollow",
    )
    return mark_safe(cleaned)  # sanitised by nh3 just above
