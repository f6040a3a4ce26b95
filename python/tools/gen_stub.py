"""Writes python/tensorbridge/_C.pyi, the type stub of the extension module, with
pybind11-stubgen; ``--check`` compares instead and fails when the checked-in stub differs.

Run it with the package to describe on the path (``PYTHONPATH=$(.ci/dev pybuild NAME)``).
The stub leaves out the value of ``__version__`` so that a version change needs no new stub.
Functions written against CPython's C API carry text signatures without types; their typed
signatures are in ``TYPED`` below (a line no longer generated is an error, so the table cannot
go stale), and ``*args`` / ``**kwargs`` of pybind11 functions are typed ``typing.Any``.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STUB = os.path.join(ROOT, "python", "tensorbridge", "_C.pyi")

# Generated line -> the same signature with types (python/src/array.cc, dlpack.cc).
TYPED = {
    "    def __dlpack__(self, *, stream = None, max_version = None, dl_device = None, copy = None):": (
        "    def __dlpack__(self, *, stream: int | None = None, max_version: tuple[int, int] | None "
        "= None, dl_device: tuple[int, int] | None = None, copy: bool | None = None) -> "
        "typing_extensions.CapsuleType:"
    ),
    "    def __dlpack_device__(self):": "    def __dlpack_device__(self) -> tuple[int, int]:",
    "def from_dlpack(x, *, device = None, copy = None):": (
        "def from_dlpack(x: typing.Any, *, device: typing.Any = None, copy: bool | None = None) "
        "-> Array:"
    ),
    "def _torch_dispatch(*args, **kwargs):": (
        "def _torch_dispatch(*args: typing.Any, **kwargs: typing.Any) -> typing.Any:"
    ),
}


def generate() -> str:
    """The stub of tensorbridge._C as pybind11-stubgen writes it, version value removed."""
    with tempfile.TemporaryDirectory() as out:
        subprocess.run(
            [sys.executable, "-m", "pybind11_stubgen", "tensorbridge._C", "-o", out],
            check=True,
            capture_output=True,
            text=True,
        )
        with open(os.path.join(out, "tensorbridge", "_C.pyi")) as f:
            text = f.read()
    text = re.sub(r"^__version__: str = .*$", "__version__: str", text, flags=re.M)
    lines = text.split("\n")
    for generated, typed in TYPED.items():
        if generated not in lines:
            raise SystemExit(
                f"gen_stub.py: TYPED names a line pybind11-stubgen no longer writes: "
                f"{generated.strip()}"
            )
        lines[lines.index(generated)] = typed
    text = "\n".join(lines)
    text = re.sub(r"\*args(?=[,)])", "*args: typing.Any", text)
    return re.sub(r"\*\*kwargs(?=\))", "**kwargs: typing.Any", text)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare, do not write")
    args = parser.parse_args()
    text = generate()
    if not args.check:
        with open(STUB, "w") as f:
            f.write(text)
        print(f"wrote {STUB}")
        return 0
    with open(STUB) as f:
        current = f.read()
    if current == text:
        return 0
    sys.stdout.writelines(
        difflib.unified_diff(
            current.splitlines(True), text.splitlines(True), "_C.pyi (checked in)", "generated"
        )
    )
    print(
        "python/tensorbridge/_C.pyi is out of date: run python/tools/gen_stub.py", file=sys.stderr
    )
    return 1


if __name__ == "__main__":
    sys.exit(main())
