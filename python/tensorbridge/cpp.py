"""``tensorbridge.cpp``: building and loading C++ kernel libraries against this package.

A C++ library that registers kernels (``TB_REGISTER_KERNELS``) compiles against the headers at
``get_include()``, links ``get_library()`` (or ``find_package(tensorbridge)`` with
``cmake_prefix_path`` on ``CMAKE_PREFIX_PATH``), and is loaded with ``load_library(path)``: its
registrations land in the same op table as the built-in kernels.
"""

from __future__ import annotations

import ctypes
import os

__all__ = ["cmake_prefix_path", "get_include", "get_library", "load_library"]

_HERE = os.path.dirname(os.path.abspath(__file__))

cmake_prefix_path: str = _HERE
"""The directory to put on ``CMAKE_PREFIX_PATH`` for ``find_package(tensorbridge)``: its
``tensorbridge::core`` target is this package's libtensorbridge.so, with its headers."""


def get_include() -> str:
    """The directory of tensorbridge's C++ headers (``#include "dispatch/op_table.h"``)."""
    return os.path.join(_HERE, "include")


def get_library() -> str:
    """The path of libtensorbridge.so this package loaded: link C++ kernel libraries to it, so
    that what they register lands in the same op table."""
    return os.path.join(_HERE, "libtensorbridge.so")


def load_library(path: str) -> None:
    """Loads a C++ shared library whose static registration blocks add kernels to the table."""
    ctypes.CDLL(path)
