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
    # torch.ops.aten lists an op only once something has looked it up: every aten op the
    # dispatcher knows is looked up here, so that the file does not depend on what ran before.
    registered = {
        n.split("::", 1)[1].split(".")[0]
        for n in torch._C._dispatch_get_all_op_names()
        if n.startswith("aten::")
    }
    for name in sorted(set(dir(torch.ops.aten)) | registered):
        try:
            packet = getattr(torch.ops.aten, name)
        except (AttributeError, RuntimeError):
            continue
        if not hasattr(packet, "overloads"):
            continue
        for overload in sorted(packet.overloads()):
            op = getattr(packet, overload)
            if ", ...)" in str(op._schema):
                continue  # `(Tensor a, ...)`: Python-only overloads the table cannot bind
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
