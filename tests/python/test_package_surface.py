"""The package's public surface (issue 44 item 4): nvfp4/__init__.py names every public name of the
compiled extension, written out, and the committed type stub python/nvfp4/_nvfp4.pyi is what
nvfp4._stubgen writes from the extension the tests run against."""
import ast
import pathlib

import nvfp4
from nvfp4 import _nvfp4, _stubgen

STUB = pathlib.Path(__file__).resolve().parents[2] / "python" / "nvfp4" / "_nvfp4.pyi"
REGENERATE = "rewrite it with `cmake --build <build dir> --target nvfp4_python_stub` and commit it"


def extension_names():
    return sorted(name for name in dir(_nvfp4) if not name.startswith("_"))


def test_all_is_the_extensions_public_names_written_out():
    init = (pathlib.Path(nvfp4.__file__)).read_text(encoding="utf-8")
    tree = ast.parse(init)
    written = [node for node in tree.body if isinstance(node, ast.Assign) and any(
        isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)]
    assert len(written) == 1 and isinstance(written[0].value, ast.List), "__all__ must be a written-out list"
    listed = [ast.literal_eval(element) for element in written[0].value.elts]
    assert listed == sorted(set(listed), key=listed.index), "__all__ lists a name twice"
    missing = sorted(set(extension_names()) - set(listed))
    extra = sorted(set(listed) - set(extension_names()) - {"__version__"})
    assert missing == [] and extra == [], f"nvfp4.__all__ misses {missing}, names {extra} the extension does not have"
    for name in listed:
        assert getattr(nvfp4, name) is getattr(_nvfp4, name), name


def stub_definitions(text):
    """Top-level names, and each class's members, that a stub defines."""
    tree = ast.parse(text)
    out = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            out[node.name] = sorted({n.name for n in node.body if isinstance(n, ast.FunctionDef)})
        elif isinstance(node, ast.FunctionDef):
            out[node.name] = None
        elif isinstance(node, ast.AnnAssign):
            out[node.target.id] = None
    return out


def test_committed_stub_is_current():
    committed = STUB.read_text(encoding="utf-8")
    generated = _stubgen.generate(_nvfp4)
    made_by = "# pybind11 " + getattr(_nvfp4, "_pybind11_version", "unknown")
    if made_by in committed.splitlines()[:3]:
        # The same pybind11 prints the same signatures: the whole text must match.
        assert committed == generated, f"python/nvfp4/_nvfp4.pyi is out of date: {REGENERATE}"
    else:
        # Another pybind11 spells types its own way: every name and member must still be there.
        assert stub_definitions(committed) == stub_definitions(generated), \
            f"python/nvfp4/_nvfp4.pyi names other calls than the extension: {REGENERATE}"


def test_stub_names_every_public_name():
    defined = stub_definitions(STUB.read_text(encoding="utf-8"))
    assert sorted(set(extension_names()) - set(defined)) == []
