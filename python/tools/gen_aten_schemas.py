"""Writes dispatch/aten_schemas.txt: the schema of every overload in torch.ops.aten, one per
line, exactly as torch prints it, followed by ' #core' when torch tags the overload core.

The C++ op table embeds this file, so that its schemas are PyTorch's own (a test checks them
against the installed torch). Run it when the pinned torch version changes:

    python python/tools/gen_aten_schemas.py
"""

import os
import sys

import torch


def main() -> None:
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = os.path.join(root, "dispatch", "aten_schemas.txt")
    lines = []
    for name in sorted(dir(torch.ops.aten)):
        try:
            packet = getattr(torch.ops.aten, name)
        except (AttributeError, RuntimeError):
            continue
        if not hasattr(packet, "overloads"):
            continue
        for overload in sorted(packet.overloads()):
            op = getattr(packet, overload)
            schema = str(op._schema)
            assert "\n" not in schema
            core = " #core" if torch.Tag.core in op.tags else ""
            lines.append(schema + core)
    with open(out, "w") as f:
        f.write(
            f"# torch {torch.__version__}: schemas of torch.ops.aten (python/tools/gen_aten_schemas.py)\n"
        )
        f.write("\n".join(lines) + "\n")
    print(f"wrote {len(lines)} schemas to {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
