"""cmake/hot_code.order (written by python/tools/gen_code_layout.py) lists the functions of
libtensorbridge.so that the model zoo runs, for GNU gold to lay out together. The list must
name functions the library still has, and where the library was linked with it (gold leaves its
.note.gnu.gold-version section), they must lie together. An installed wheel's library has no
symbol table (stripped): the libraries of the build trees under build/ are read then."""

import glob
import os
import shutil
import subprocess

import pytest

import tensorbridge.cpp

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ORDER_FILE = os.path.join(ROOT, "cmake", "hot_code.order")
LIBRARIES = [
    tensorbridge.cpp.get_library(),
    *sorted(glob.glob(os.path.join(ROOT, "build", "*", "libtensorbridge.so"))),
]

pytestmark = pytest.mark.skipif(
    shutil.which("nm") is None or shutil.which("readelf") is None,
    reason="needs binutils (nm, readelf)",
)


def listed() -> list[str]:
    with open(ORDER_FILE) as f:
        return [ln.strip() for ln in f if ln.strip() and not ln.startswith("#")]


def functions(path: str) -> dict[str, tuple[int, int]]:
    """name -> (address, size) of a library's defined functions (none when stripped)."""
    out = subprocess.run(
        ["nm", "--defined-only", "-S", path], check=False, capture_output=True, text=True
    ).stdout
    syms = {}
    for line in out.splitlines():
        parts = line.split(maxsplit=3)
        if len(parts) == 4 and parts[2] in "tTwW":
            syms[parts[3]] = (int(parts[0], 16), int(parts[1], 16))
    return syms


def gold_linked(path: str) -> bool:
    notes = subprocess.run(
        ["readelf", "-S", "-W", path], check=True, capture_output=True, text=True
    )
    return ".note.gnu.gold-version" in notes.stdout


def linked_with_list(path: str) -> bool:
    """Linked by gold after the list last changed (an older build tree has an older list)."""
    return os.path.getmtime(path) >= os.path.getmtime(ORDER_FILE) and gold_linked(path)


def library(ordered: bool) -> tuple[str, dict[str, tuple[int, int]]]:
    """The first library with a symbol table that gold linked (the builds the list is for:
    optimised, not sanitized; a sanitizer build's -O1 clones other functions), and linked with
    the list as it is now, if `ordered`."""
    for path in LIBRARIES:
        if not os.path.exists(path) or not gold_linked(path):
            continue
        if not ordered or linked_with_list(path):
            syms = functions(path)
            if syms:
                return path, syms
    pytest.skip(
        "no libtensorbridge.so with a symbol table linked by GNU gold"
        + (" with cmake/hot_code.order as it is now" if ordered else "")
        + f" among {LIBRARIES}"
    )


def symbol_of(section: str) -> str:
    if section.startswith(".text.unlikely."):
        return section[len(".text.unlikely.") :] + ".cold"
    if section.startswith(".text.startup."):
        return section[len(".text.startup.") :]
    assert section.startswith(".text."), section
    return section[len(".text.") :]


def test_order_file_names_functions_of_the_library():
    sections = listed()
    assert len(sections) > 500, "cmake/hot_code.order is nearly empty"
    path, syms = library(ordered=False)
    missing = [s for s in sections if symbol_of(s) not in syms]
    # Small edits to the kernels rename a few functions; a list that misses many of them lays
    # out little: run python/tools/gen_code_layout.py again.
    assert len(missing) <= len(sections) // 5, (
        f"{len(missing)} of {len(sections)} functions of cmake/hot_code.order are not in "
        f"{path} (first: {missing[:3]}): regenerate it with python/tools/gen_code_layout.py"
    )


def test_listed_functions_lie_together_when_linked_by_gold():
    _, syms = library(ordered=True)
    found = sorted(syms[symbol_of(s)] for s in listed() if symbol_of(s) in syms)
    # A few small listed pieces go elsewhere (split parts that GCC puts in .text.unlikely, static
    # constructors in .text.startup): the middle 90% of them must lie together, nothing but
    # alignment padding between them.
    middle = found[len(found) // 20 : len(found) - len(found) // 20]
    span = middle[-1][0] + middle[-1][1] - middle[0][0]
    size = sum(n for _, n in middle)
    assert span < 1.1 * size + 64 * len(middle), (len(found), span, size)
