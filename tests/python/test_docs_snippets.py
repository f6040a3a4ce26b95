"""Every code example of the documentation runs: each script under docs/snippets/ (the pages
include parts of them with ``literalinclude``) runs in a fresh interpreter and exits 0. The
scripts check their own results with assertions."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

import tensorbridge as tb

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOCS = os.path.join(ROOT, "docs")
SNIPPETS = os.path.join(DOCS, "snippets")
SCRIPTS = sorted(f for f in os.listdir(SNIPPETS) if f.endswith(".py"))


@pytest.mark.parametrize("script", SCRIPTS)
def test_snippet_runs(script):
    if script == "cpp_plugin.py" and not os.path.isdir(tb.cpp.get_include()):
        pytest.skip(
            "this tensorbridge has no C++ headers beside it (a development build on "
            "PYTHONPATH): the installed package has them"
        )
    env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))
    proc = subprocess.run(
        [sys.executable, os.path.join(SNIPPETS, script)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=SNIPPETS,
        env=env,
    )
    assert proc.returncode == 0, f"{script} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"


def test_every_snippet_is_shown_and_every_included_part_exists():
    """Each script is included by a page, and each ``start-after`` marker a page names is in
    the script (Sphinx would include nothing for a missing one)."""
    used = set()
    for dirpath, _, files in os.walk(DOCS):
        for name in files:
            if not name.endswith(".rst"):
                continue
            with open(os.path.join(dirpath, name)) as f:
                text = f.read()
            for m in re.finditer(
                r"literalinclude:: (?:\.\./)*snippets/(\w+\.py)\n((?:   :.*\n)*)", text
            ):
                script, options = m.group(1), m.group(2)
                used.add(script)
                with open(os.path.join(SNIPPETS, script)) as f:
                    source = f.read()
                for marker in re.findall(r":(?:start-after|end-before): (.+)", options):
                    assert marker + "\n" in source, f"{name}: {marker!r} is not in {script}"
    assert used == set(SCRIPTS), f"snippets no page shows: {set(SCRIPTS) - used}"
