"""The hard rule: conq.impl never imports the model or the conformance checker."""

import ast
import pathlib

IMPL = pathlib.Path(__file__).resolve().parents[2] / "impl"


def test_impl_does_not_import_model_or_conformance():
    offenders = []
    files = sorted(IMPL.glob("**/*.py"))
    assert len(files) >= 6
    for path in files:
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [("." * node.level) + (node.module or "")]
            for name in names:
                if name.startswith(("conq.model", "conq.conformance", "model", "conformance", "..")):
                    offenders.append(f"{path.name}: {name}")
    assert not offenders, offenders
