"""The package's typing surface: py.typed, the checked-in stub of the extension module (as
pybind11-stubgen writes it from the built module), and annotations on every public name."""

import ast
import importlib.util
import inspect
import os
import subprocess
import sys

import pytest

import tensorbridge as tb

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PKG = os.path.dirname(tb.__file__)


def test_package_is_marked_typed():
    assert os.path.isfile(os.path.join(PKG, "py.typed"))
    assert os.path.isfile(os.path.join(PKG, "_C.pyi"))


@pytest.mark.skipif(
    importlib.util.find_spec("pybind11_stubgen") is None,
    reason="pybind11-stubgen is not installed (.ci/dev's set-up installs it)",
)
def test_checked_in_stub_matches_the_built_module():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    out = subprocess.run(
        [sys.executable, os.path.join(ROOT, "python", "tools", "gen_stub.py"), "--check"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]


def _unannotated_in_stub(tree: ast.Module) -> list[str]:
    """Public functions and methods of the stub with a parameter or return left untyped."""
    missing = []

    def check(fn: ast.FunctionDef, where: str) -> None:
        a = fn.args
        params = a.posonlyargs + a.args + a.kwonlyargs
        params += [p for p in (a.vararg, a.kwarg) if p is not None]
        for p in params:
            if p.arg not in ("self", "cls") and p.annotation is None:
                missing.append(f"{where}{fn.name}({p.arg})")
        if fn.returns is None:
            missing.append(f"{where}{fn.name} -> ?")

    def public(name: str) -> bool:
        return not name.startswith("_") or (name.startswith("__") and name.endswith("__"))

    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and public(node.name):
            check(node, "")
        elif isinstance(node, ast.ClassDef) and public(node.name):
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and public(item.name):
                    check(item, f"{node.name}.")
    return missing


def test_stub_annotates_every_public_function():
    with open(os.path.join(PKG, "_C.pyi")) as f:
        tree = ast.parse(f.read())
    assert _unannotated_in_stub(tree) == []


def _unannotated(fn, where: str) -> list[str]:
    fn = inspect.unwrap(fn)
    sig = inspect.signature(fn)
    missing = [
        f"{where}({p.name})"
        for p in sig.parameters.values()
        if p.name not in ("self", "cls") and p.annotation is inspect.Parameter.empty
    ]
    if sig.return_annotation is inspect.Signature.empty and fn.__name__ != "__init__":
        missing.append(f"{where} -> ?")
    return missing


def test_public_python_api_is_annotated():
    missing = []
    public = [(tb, n) for n in tb.__all__]
    public += [(m, n) for m in (tb.diagnostics, tb.cpp) for n in m.__all__]
    for module, name in public:
        obj = getattr(module, name)
        if getattr(obj, "__module__", "").endswith("._C"):
            continue  # checked through the stub
        if inspect.isfunction(obj):
            missing += _unannotated(obj, name)
        classes = [obj] if inspect.isclass(obj) else [type(obj)] if name == "config" else []
        for cls in classes:
            for attr, member in vars(cls).items():
                if attr.startswith("_") and attr not in ("__init__", "__new__", "__call__"):
                    continue
                if isinstance(member, (staticmethod, classmethod)):
                    member = member.__func__
                if isinstance(member, property):
                    for acc in (member.fget, member.fset):
                        if acc is not None:
                            missing += _unannotated(acc, f"{cls.__name__}.{attr}")
                elif inspect.isfunction(member):
                    missing += _unannotated(member, f"{cls.__name__}.{attr}")
    assert missing == [], "\n".join(missing)
