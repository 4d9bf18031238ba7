"""The type stubs (_uni20.pyi) and docstrings cover the extension module."""

import ast
import pathlib

import uni20
from uni20 import _uni20

STUB = pathlib.Path(uni20.__file__).with_name("_uni20.pyi")


def stub_names():
    tree = ast.parse(STUB.read_text())
    top, members = set(), {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            top.add(node.name)
        elif isinstance(node, (ast.AnnAssign,)) and isinstance(node.target, ast.Name):
            top.add(node.target.id)
        if isinstance(node, ast.ClassDef):
            names = set()
            for item in node.body:
                if isinstance(item, ast.FunctionDef):
                    names.add(item.name)
                elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    names.add(item.target.id)
            members[node.name] = names
    return top, members


def public(obj):
    return {n for n in dir(obj) if not n.startswith("_")}


def test_stub_has_every_name_and_member():
    top, members = stub_names()
    module_names = public(_uni20) - {"models"}
    assert module_names <= top, module_names - top
    for name in module_names:
        obj = getattr(_uni20, name)
        if isinstance(obj, type):
            missing = public(obj) - members[name]
            assert not missing, f"{name}: not in the stub: {missing}"


def test_everything_public_has_a_docstring():
    for name in public(_uni20):
        obj = getattr(_uni20, name)
        if callable(obj):
            assert obj.__doc__, name
        if isinstance(obj, type):
            for m in public(obj):
                attr = getattr(obj, m)
                assert getattr(attr, "__doc__", None), f"{name}.{m}"


def test_package_is_typed():
    assert STUB.with_name("py.typed").exists()
