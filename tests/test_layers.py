"""The package's layers point one way: core imports neither face; the tool and the study import
core, never each other; a study stage reaches the tool only through the import of models trained
elsewhere (`import-external`). So a change to the tool leaves every in-house study stage up to
date (`dvc status`), and a newcomer can read the architecture off the folders."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_dvc_deps import ROOT, SRC, _imports, module_closure

PKG = SRC / "ncip"
# The one study module allowed to use the tool: `ncip import-external` reads other tools'
# checkpoints with it, outside the pipeline (no stage imports it).
BRIDGE = PKG / "study" / "importing.py"


def _layer_imports(layer: str) -> dict[str, set[str]]:
    return {str(p.relative_to(SRC)): _imports(p) for p in sorted((PKG / layer).rglob("*.py"))}


def _violations(layer: str, forbidden: tuple[str, ...], allow: set[Path] = frozenset()) -> list:
    out = []
    for f, names in _layer_imports(layer).items():
        if SRC / f in allow:
            continue
        out += [f"{f} imports {n}" for n in sorted(names) if n.startswith(forbidden)]
    return out


def test_core_imports_neither_face():
    assert not _violations("core", ("ncip.tool", "ncip.study"))


def test_tool_does_not_import_the_study():
    assert not _violations("tool", ("ncip.study",))


def test_study_does_not_import_the_tool():
    assert not _violations("study", ("ncip.tool",), {BRIDGE})


@pytest.mark.parametrize("stage", sorted(p.name for p in (ROOT / "stages").glob("*.py")))
def test_study_stages_do_not_reach_the_tool(stage):
    files = module_closure(ROOT / "stages" / stage)
    tool = sorted(str(p.relative_to(SRC)) for p in files if (PKG / "tool") in p.parents)
    assert not tool, f"stages/{stage} imports the tool: {tool}"
    assert BRIDGE not in files, f"stages/{stage} imports the external-model import"


def test_the_check_sees_a_forbidden_import(tmp_path, monkeypatch):
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from ncip.tool.formats import discover\n")
    assert "ncip.tool.formats" in _imports(bad)
