"""Writes cmake/hot_code.order: the functions of libtensorbridge.so that the model zoo runs,
one input section name a line (``.text.<symbol>``), for GNU gold's --section-ordering-file
(cmake/TbOptions.cmake, ``tb_target_code_layout``).

Why: the kernel maps an executed page of a shared library with its neighbours in the page
cache (fault-around, 64 KB windows). The library's .text holds every op for every dtype; the
functions one model runs are spread over all of it, so that most of the file would become
resident in every process. Laid out first and together, they take a few such windows.

How: the library's functions each have a section of their own (-ffunction-sections, the
default of TB_CODE_LAYOUT), and the zoo's models (``tensorbridge.zoo.SPECS``, size "small")
run one after the other through ``torch.compile(backend="tensorbridge")``: inference in float32
and under bfloat16 autocast, a training step in float32 and under autocast. Which code pages
each model executes comes from the CPU's accessed bits: every page of the library's code is
made present first (so nothing faults and the kernel maps no neighbours), each page a virtual
memory area of its own, the bits cleared (``/proc/self/clear_refs``) before each model and read
after it (``Referenced`` in ``/proc/self/smaps``). Every function that overlaps an executed page
is listed: those that most models run first, then in address order. The code that loading and
importing the library runs (static registration, the module's set-up) is found the same way in
a fresh interpreter, prepared by an rtld-audit library (LD_AUDIT, compiled with ``cc``) before
the library's constructors run, and listed after. Linux only; run it on a development build
with the default TB_CODE_LAYOUT:

    PP=$(.ci/dev pybuild layout) && PYTHONPATH=$PP python python/tools/gen_code_layout.py

Run it again when the kernels change much: tests/python/test_code_layout.py fails when too few
of the listed functions are still in the library.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import mmap
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ORDER_FILE = os.path.join(ROOT, "cmake", "hot_code.order")
LIBRARY = "libtensorbridge.so"
PAGE = mmap.PAGESIZE
MADV_DONTDUMP = 16


def mappings(path_part: str) -> list[tuple[int, int, str, int, str]]:
    """(start, end, permissions, file offset, path) of this process's mappings of a file."""
    out = []
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 6 and parts[5].endswith(path_part):
                start, end = (int(x, 16) for x in parts[0].split("-"))
                out.append((start, end, parts[1], int(parts[2], 16), parts[5]))
    return out


def text_symbols(path: str) -> list[tuple[int, int, str]]:
    """(address, size, name) of the library's defined functions, by address."""
    nm = subprocess.run(
        ["nm", "--defined-only", "-S", "--no-sort", path],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    syms = []
    for line in nm.splitlines():
        parts = line.split(maxsplit=3)
        if len(parts) == 4 and parts[2] in "tTwW":
            syms.append((int(parts[0], 16), int(parts[1], 16), parts[3]))
    return sorted(syms)


def section_of(symbol: str) -> str:
    """The input section GCC's -ffunction-sections gives a function (a clone such as
    ``f.constprop.0`` keeps its suffix; a cold part ``f.cold`` sits in .text.unlikely.f, a
    file's static constructor in .text.startup)."""
    if symbol.endswith(".cold"):
        return ".text.unlikely." + symbol[: -len(".cold")]
    if symbol.startswith("_GLOBAL__sub_I_"):
        return ".text.startup." + symbol
    return ".text." + symbol


class CodePages:
    """The executable mappings of the library, one virtual memory area a page (every other page
    marked MADV_DONTDUMP, which changes nothing else), all present; then which of them the CPU
    has executed since: smaps' "Referenced" per area, after clear_refs reset the accessed bits.
    With every page present nothing faults, so the kernel maps no neighbours (fault-around)."""

    def __init__(self, prepare: bool = True) -> None:
        maps = mappings("/" + LIBRARY)
        if not maps:
            sys.exit(f"{LIBRARY} is not loaded")
        self.path = maps[0][4]
        self.base = next(s for s, _, _, off, _ in maps if off == 0)  # the ELF load address
        self.text = [(s, e) for s, e, perm, _, _ in maps if "x" in perm]
        if not prepare:
            return
        libc = ctypes.CDLL(None, use_errno=True)
        libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        for s, e in self.text:
            for a in range(s + PAGE, e, 2 * PAGE):
                if libc.madvise(a, PAGE, MADV_DONTDUMP) != 0:
                    sys.exit(f"madvise: {os.strerror(ctypes.get_errno())}")
            ctypes.string_at(s, e - s)  # every page present
        self.clear()

    @staticmethod
    def clear() -> None:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("1")  # the accessed bits of every page of this process

    def executed(self) -> set[int]:
        """Link-time addresses of the code pages referenced since the start."""
        out, start = set(), None
        with open("/proc/self/smaps") as f:
            for line in f:
                head = line.split(maxsplit=1)[0]
                if "-" in head and not head.endswith(":"):
                    s, e = (int(x, 16) for x in head.split("-"))
                    start = s if any(a <= s < b for a, b in self.text) else None
                    end = e
                elif head == "Referenced:" and start is not None and int(line.split()[1]) > 0:
                    out.update(range(start - self.base, end - self.base, PAGE))
        return out


# The same preparation for the code that runs while the library loads (static registration)
# and while `import tensorbridge` runs: an rtld-audit library (LD_AUDIT) makes the pages
# present and clears the accessed bits when the dynamic loader has mapped the library, before
# its static constructors run.
AUDIT_C = r"""
#define _GNU_SOURCE
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

unsigned int la_version(unsigned int version) { return version; }

unsigned int la_objopen(struct link_map* map, Lmid_t lmid, uintptr_t* cookie) {
  const char* name = map->l_name;
  size_t n = strlen(name), k = strlen("/LIBRARY");
  if (n < k || strcmp(name + n - k, "/LIBRARY") != 0) return 0;
  const ElfW(Ehdr)* eh = (const ElfW(Ehdr)*)map->l_addr;
  const ElfW(Phdr)* ph = (const ElfW(Phdr)*)(map->l_addr + eh->e_phoff);
  const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
  for (int i = 0; i < eh->e_phnum; ++i) {
    if (ph[i].p_type != PT_LOAD || !(ph[i].p_flags & PF_X)) continue;
    uintptr_t s = (map->l_addr + ph[i].p_vaddr) & ~(page - 1);
    uintptr_t e = (map->l_addr + ph[i].p_vaddr + ph[i].p_memsz + page - 1) & ~(page - 1);
    for (uintptr_t a = s + page; a < e; a += 2 * page) madvise((void*)a, page, MADV_DONTDUMP);
    for (uintptr_t a = s; a < e; a += page) (void)*(volatile const char*)a;
  }
  int fd = open("/proc/self/clear_refs", O_WRONLY);
  if (fd >= 0) {
    if (write(fd, "1", 1) != 1) {}
    close(fd);
  }
  return 0;
}
""".replace("LIBRARY", LIBRARY)


def import_pages() -> set[int]:
    """Code pages executed while `import tensorbridge` runs, in a fresh interpreter."""
    with tempfile.TemporaryDirectory() as tmp:
        src, lib = os.path.join(tmp, "audit.c"), os.path.join(tmp, "audit.so")
        with open(src, "w") as f:
            f.write(AUDIT_C)
        cc = os.environ.get("CC", "cc")
        subprocess.run([cc, "-shared", "-fPIC", "-O1", src, "-o", lib], check=True)
        out = subprocess.run(
            [sys.executable, os.path.abspath(__file__), "--import-pages"],
            env=dict(os.environ, LD_AUDIT=lib),
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    return set(json.loads(out.splitlines()[-1]))


def run_model(name: str) -> None:
    """Inference and a training step, in float32 and under bfloat16 autocast."""
    import torch

    from tensorbridge import zoo

    for autocast in (False, True):
        torch._dynamo.reset()
        model, inputs = zoo.build(name, "small")
        compiled = torch.compile(model, backend="tensorbridge")
        with torch.autocast("cpu", torch.bfloat16, enabled=autocast):
            with torch.no_grad():
                for _ in range(2):
                    compiled(**inputs)
            model.train()
            for _ in range(2):
                for p in model.parameters():
                    p.grad = None
                zoo.loss_of(compiled(**inputs)).backward()


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", nargs="+", default=None, help="default: every zoo model")
    p.add_argument("--out", default=ORDER_FILE)
    p.add_argument("--import-pages", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.import_pages:  # the child of import_pages(), under the audit library
        import tensorbridge

        print(json.dumps(sorted(CodePages(prepare=False).executed())))
        return
    at_import = import_pages()

    import torch

    import tensorbridge  # noqa: F401  (loads the library)
    from tensorbridge import zoo

    torch.set_num_threads(1)
    for limit in ("recompile_limit", "cache_size_limit", "accumulated_recompile_limit"):
        if hasattr(torch._dynamo.config, limit):
            setattr(torch._dynamo.config, limit, 256)
    code = CodePages()
    syms = text_symbols(code.path)
    uses: dict[str, int] = {}  # function -> how many models run it
    pages: set[int] = set()
    for name in args.models or list(zoo.SPECS):
        code.clear()
        run_model(name)
        ran = code.executed()
        pages |= ran
        for addr, size, sym in syms:
            if any(pg in ran for pg in range(addr // PAGE * PAGE, addr + max(size, 1), PAGE)):
                uses[sym] = uses.get(sym, 0) + 1
        print(f"  {name}: {len(ran)} pages", flush=True)
    # The functions every model runs first, then those of fewer and fewer models: the code of
    # one model then spans as few fault-around windows as it can.
    order = {sym: i for i, (_, _, sym) in enumerate(syms)}
    hot = sorted(uses, key=lambda sym: (-uses[sym], order[sym]))
    # Then the code only loading and importing the library runs.
    hot += [
        sym
        for addr, size, sym in syms
        if sym not in uses
        and any(pg in at_import for pg in range(addr // PAGE * PAGE, addr + max(size, 1), PAGE))
    ]
    listed = set(hot)
    hot_bytes = sum(size for _, size, sym in syms if sym in listed)
    sections = list(dict.fromkeys(section_of(n) for n in hot))
    with open(args.out, "w") as f:
        f.write(
            "# Functions of libtensorbridge.so that the model zoo runs, then those that loading\n"
            "# and importing it run, laid out together by GNU gold (--section-ordering-file).\n"
            "# Written by python/tools/gen_code_layout.py.\n"
        )
        f.writelines(s + "\n" for s in sections)
    # (gold puts read-only data in the executable segment too: count the functions' pages.)
    text = {pg for addr, size, _ in syms for pg in range(addr // PAGE * PAGE, addr + size, PAGE)}
    print(
        f"{len(pages & text)} of {len(text)} code pages executed by the zoo, "
        f"{len(at_import & text)} at import; "
        f"{len(sections)} functions "
        f"({hot_bytes / 2**20:.2f} MB) written to {os.path.relpath(args.out, ROOT)}"
    )


if __name__ == "__main__":
    main()
