"""The tool installs without the study (issue 39): pyproject's dependencies hold the tool's,
the `study` extra the rest; `ncip rank` runs with every study package unimportable, and a study
command says in one line what to install."""

from __future__ import annotations

import subprocess
import sys
import tomllib

from helpers import ROOT, save_drifting_epochs

from ncip.cli import STUDY_PACKAGES

BLOCK = """
import sys, importlib.abc
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {blocked!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
sys.meta_path.insert(0, Block())
from ncip.cli import app
app()
"""

MLP = """
import torch.nn as nn


def build(num_classes=10):
    return nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, num_classes))
"""

# the distribution name of each import name that differs
DISTRIBUTIONS = {"sklearn": "scikit-learn"}


def _names(deps: list[str]) -> set[str]:
    return {d.split("==")[0].split("[")[0].lower() for d in deps}


def test_the_tools_dependencies_hold_no_study_package():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    tool, study = _names(project["dependencies"]), _names(project["optional-dependencies"]["study"])
    wanted = {DISTRIBUTIONS.get(p, p) for p in STUDY_PACKAGES} - {"transformers", "accelerate"}
    assert not wanted & tool and wanted <= study
    assert "ncip[study,test]" in project["optional-dependencies"]["dev"]


def test_rank_runs_without_the_study_packages(tmp_path):
    import numpy as np
    import torch

    (tmp_path / "mlp.py").write_text(MLP)
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(20, 32), torch.nn.ReLU(), torch.nn.Linear(32, 10))
    save_drifting_epochs(net, tmp_path / "ck", 4)
    np.save(tmp_path / "x.npy", np.random.default_rng(0).standard_normal((40, 20)).astype("f4"))
    script = BLOCK.format(blocked=sorted(STUDY_PACKAGES))

    def ncip(*args):
        return subprocess.run(
            [sys.executable, "-c", script, *map(str, args)],
            capture_output=True, text=True, cwd=tmp_path,
        )  # fmt: skip

    r = ncip("rank", tmp_path / "ck", "--model", f"{tmp_path / 'mlp.py'}:build", "--inputs",
             tmp_path / "x.npy", "--out", tmp_path / "r.csv", "--k", 2, "--quiet")  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "r.csv").is_file()
    r = ncip("check-params", ROOT / "params.yaml")
    assert r.returncode == 2, r.stderr
    lines = [ln for ln in (r.stdout + r.stderr).splitlines() if ln.strip()]
    assert len(lines) == 1 and "pip install 'ncip[study]'" in lines[0], lines
