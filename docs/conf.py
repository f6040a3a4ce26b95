"""Sphinx configuration of tensorbridge's documentation (built by ``.ci/dev docs``)."""

import re

import tensorbridge

project = "tensorbridge"
author = "the tensorbridge authors"
copyright = "the tensorbridge authors"
release = tensorbridge.__version__
version = release

extensions = ["sphinx.ext.autodoc"]

# Docstrings name arguments as `x`; render them as code, as the rest of the text does.
default_role = "code"
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_default_options = {"undoc-members": False}
nitpicky = False

# machine.rst is included by performance.rst, not a page of its own.
exclude_patterns = ["_build", "snippets", "performance/machine.rst"]
templates_path: list[str] = []
html_theme = "alabaster"
html_title = f"tensorbridge {release}"
html_theme_options = {
    "description": "PyTorch ops on arrays other frameworks own",
    "fixed_sidebar": True,
    "page_width": "1200px",  # room for 100-column code
    "body_max_width": "none",
}
html_static_path: list[str] = []
html_show_sourcelink = False
html_copy_source = False

# Docstrings write plurals of literals as ``Tensor``s, which plain text reads well but
# reStructuredText does not end a literal on; an escaped space (``Tensor``\ s) renders the same.
# The literals are paired left to right, as docutils pairs them.
_LITERAL = re.compile(r"``(?:(?!``).)+``")


def _end_literal(m: re.Match) -> str:
    after = m.string[m.end() : m.end() + 1]
    return m.group(0) + ("\\ " if after.isalpha() else "")


def _literal_plurals(app, what, name, obj, options, lines) -> None:
    lines[:] = [_LITERAL.sub(_end_literal, line) for line in lines]


def setup(app) -> None:
    app.connect("autodoc-process-docstring", _literal_plurals)
