"""mkdocs hook: the docstrings' Sphinx roles (:class:`X`) shown as plain code (`X`)."""

from __future__ import annotations

import re
from typing import Any

_ROLE = re.compile(r":(?:class|meth|func|attr|data|exc|mod|obj):(?=<code>)")


def on_page_content(html: str, **kwargs: Any) -> str:
    return _ROLE.sub("", html)
