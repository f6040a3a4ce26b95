"""A C++ kernel library built against the installed headers and loaded into the table
(docs/guide/cpp.rst). The library's source is tests/python/plugin/plugin.cc."""

import os
import subprocess
import sys
import tempfile

import numpy as np

import tensorbridge as tb

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
source = os.path.join(ROOT, "tests", "python", "plugin", "plugin.cc")
out_dir = tempfile.mkdtemp()

# [build]
libdir = os.path.dirname(tb.cpp.get_library())
lib = os.path.join(out_dir, "libplugin.so")
subprocess.run(
    ["g++", "-std=c++17", "-O2", "-shared", "-fPIC", source, f"-I{tb.cpp.get_include()}",
     f"-L{libdir}", "-ltensorbridge", f"-Wl,-rpath,{libdir}", "-o", lib],
    check=True,
)  # fmt: skip
tb.cpp.load_library(lib)  # its TB_REGISTER_KERNELS block runs now, into the same table
print(tb.diagnostics.explain("plugin::triple"))
# plugin::triple on cpu: kernel, kernel for this device (registered at python/plugin/plugin.cc:19)
print(tb.call("plugin::triple", np.ones(3, np.float32)).numpy())  # [3. 3. 3.]
# [build end]
sys.exit(0 if "plugin/plugin.cc" in tb.diagnostics.explain("plugin::triple") else 1)
