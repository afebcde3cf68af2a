"""dvc.yaml's dependencies are checked, not hoped: every `ncip` module a stage script imports
(directly, transitively, or lazily inside a function) must be a declared dep of that stage, so a
change to it re-runs the stage. (What a stage reads at run time is checked by the end-to-end
test in test_pipeline_dvc.py, which records every file each stage opens.)"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"


def _module_file(name: str) -> Path | None:
    base = SRC.joinpath(*name.split("."))
    if base.with_suffix(".py").is_file():
        return base.with_suffix(".py")
    if (base / "__init__.py").is_file():
        return base / "__init__.py"
    return None


# Functions whose lazy imports no stage reaches: the package's `ncip.rank`-style attribute
# loader, and the parameter check that `ncip check-params` runs before `dvc repro`.
NOT_REACHED = {"ncip/__init__.py": {"__getattr__"}, "ncip/study/subjects.py": {"check_params"}}


def _imports(path: Path) -> set[str]:
    """The ncip modules a file imports anywhere in it (module level or inside functions)."""
    tree = ast.parse(path.read_text(), str(path))
    skip = NOT_REACHED.get(str(path.relative_to(SRC)) if SRC in path.parents else "", set())
    for node in list(tree.body):
        if isinstance(node, ast.FunctionDef) and node.name in skip:
            tree.body.remove(node)
        # `if TYPE_CHECKING:` imports (annotations only) never run
        elif isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            tree.body.remove(node)
    out: set[str] = set()
    pkg = ".".join(path.relative_to(SRC).with_suffix("").parts[:-1]) if SRC in path.parents else ""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.split(".")[0] == "ncip"}
        elif isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            if node.level:  # relative import inside the package
                mod = ".".join(pkg.split(".")[: len(pkg.split(".")) - node.level + 1] + [mod])
            if mod.split(".")[0] != "ncip":
                continue
            out.add(mod)
            out |= {f"{mod}.{a.name}" for a in node.names if _module_file(f"{mod}.{a.name}")}
    # a module that imports every module of its own package (ncip.study.datasets' __init__, and
    # ncip.study.scores.registry when a method is first looked up)
    if "pkgutil.iter_modules(" in path.read_text():
        out |= {f"{pkg}.{p.stem}" for p in path.parent.glob("*.py") if p.stem != "__init__"}
    return out


def module_closure(script: Path) -> set[Path]:
    """Every ncip source file a script can import, with the packages' __init__ files."""
    seen: set[Path] = set()
    todo = [script]
    while todo:
        f = todo.pop()
        for name in _imports(f):
            parts = name.split(".")
            for i in range(1, len(parts) + 1):  # importing a.b.c runs a and a.b first
                m = _module_file(".".join(parts[:i]))
                if m is not None and m not in seen:
                    seen.add(m)
                    todo.append(m)
    return seen


def _covered(path: str, deps: list[str]) -> bool:
    return any(path == d or path.startswith(d.rstrip("/") + "/") for d in deps)


def missing_deps(dvc_yaml: Path) -> dict[str, list[str]]:
    """stage -> the ncip source files its script imports that it does not declare."""
    stages = yaml.safe_load(dvc_yaml.read_text())["stages"]
    out = {}
    for name, st in stages.items():
        m = re.search(r"scripts/py (stages/\S+\.py)", st["cmd"])
        assert m, f"{name}: its cmd runs no stage script"
        deps = [d if isinstance(d, str) else next(iter(d)) for d in st.get("deps", [])]
        need = [m.group(1)] + sorted(
            str(p.relative_to(ROOT)) for p in module_closure(ROOT / m.group(1))
        )
        gaps = [p for p in need if not _covered(p, deps)]
        if gaps:
            out[name] = gaps
    return out


def test_every_stage_declares_the_modules_it_imports():
    gaps = missing_deps(ROOT / "dvc.yaml")
    assert not gaps, "dvc.yaml lacks deps (stage: files):\n" + "\n".join(
        f"  {s}: {', '.join(f)}" for s, f in gaps.items()
    )


def test_the_check_fails_when_a_dep_is_removed(tmp_path):
    text = (ROOT / "dvc.yaml").read_text()
    stages = yaml.safe_load(text)["stages"]
    assert "src/ncip/study/scores" in stages["score-baselines"]["deps"]
    cut = tmp_path / "dvc.yaml"
    # drop the score package from score-baselines only (its deps list names it once)
    block = text[text.index("  score-baselines:") :]
    block_cut = block.replace("      - src/ncip/study/scores\n", "", 1)
    cut.write_text(text.replace(block, block_cut))
    gaps = missing_deps(cut)
    assert list(gaps) == ["score-baselines"]
    assert "src/ncip/study/scores/registry.py" in gaps["score-baselines"]
    assert "src/ncip/study/scores/effimap.py" in gaps["score-baselines"]


def test_the_closure_follows_lazy_and_transitive_imports(tmp_path):
    files = module_closure(ROOT / "stages" / "report.py")
    names = {str(p.relative_to(SRC)) for p in files}
    # report.py imports ncip.study.report, whose inputs module imports ncip.study.cost lazily in a
    # function, and ncip.study.evaluation -> ncip.core.metrics at module level
    assert {
        "ncip/study/report/inputs.py",
        "ncip/study/cost.py",
        "ncip/core/metrics.py",
        "ncip/__init__.py",
    } <= names


@pytest.mark.parametrize("stage", sorted(p.name for p in (ROOT / "stages").glob("*.py")))
def test_stage_scripts_only_wire(stage):
    """Stage scripts parse options, call the library, write outputs: at most 80 lines."""
    n = len((ROOT / "stages" / stage).read_text().splitlines())
    assert n <= 80, f"stages/{stage} has {n} lines; move its logic into src/ncip"


def test_the_read_recorder_sees_safetensors_parquet_and_numpy_reads(tiny_run, tmp_path):
    """What test_pipeline_dvc's check relies on: a stage run with NCIP_RECORD_READS lists the
    files it read, including those opened outside Python's `open` (safetensors, Parquet)."""
    import json
    import os
    import subprocess
    import sys

    d = tiny_run["dir"]
    log = tmp_path / "reads.jsonl"
    sel = tmp_path / "sel.json"
    env = {**os.environ, "NCIP_RECORD_READS": str(log)}
    for args in (
        [
            "select_checkpoints.py",
            "--checkpoints",
            "models",
            "--k",
            "3",
            "--out",
            str(sel),
            "--plot-out",
            str(tmp_path / "s.csv"),
        ],
        [
            "predict_probabilities.py",
            "--checkpoints",
            "models",
            "--data",
            "data",
            "--out",
            str(tmp_path / "pred"),
        ],
    ):
        r = subprocess.run(
            [sys.executable, str(ROOT / "stages" / args[0]), *args[1:]],
            cwd=d,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert r.returncode == 0, r.stderr
    reads = [set(json.loads(line)["reads"]) for line in log.read_text().splitlines()]
    assert "models/epoch-006.safetensors" in reads[0]
    assert {"data/test.npz", "data/info.json", "models/epoch-001.safetensors"} <= reads[1]


def test_evaluation_waits_for_no_retraining():
    """evaluate-rauc reads the attacks' own records, so an experiment that targets it (the
    sensitivity sweep: `dvc exp run evaluate-rauc -S k=...`) fine-tunes nothing."""
    import networkx as nx
    from dvc.repo import Repo

    with Repo(str(ROOT)) as repo:
        graph = repo.index.graph
        stage = next(s for s in graph.nodes if s.addressing == "evaluate-rauc")
        upstream = {s.addressing.split("@")[0] for s in nx.descendants(graph, stage)}
    assert {"generate-adversarial", "score-ncip", "score-baselines"} <= upstream
    assert not {s for s in upstream if s.startswith("retrain") or s == "publish-records"}


def test_study_paths_are_the_paths_dvc_yaml_writes():
    """ncip.study.paths is the one home of the per-run naming rule in Python; dvc.yaml writes
    the same paths into its commands (published records as the mirrors of records/)."""
    from ncip.study.paths import StudyPaths

    text = (ROOT / "dvc.yaml").read_text()
    paths = StudyPaths(Path(""))
    mirrors = {"plots/training/": "records/training/", "metrics/attacks/": "records/attacks/"}
    names = [n for n in vars(StudyPaths) if not n.startswith("_") and n != "root"]
    assert len(names) == 9, names
    for name in names:
        path = getattr(paths, name)("SUBJECT", 987654).as_posix()
        path = path.replace("SUBJECT", "${item.subject}").replace("987654", "${item.run}")
        for published, recorded in mirrors.items():
            path = path.replace(published, recorded)
        if name == "retrain":  # published as one file per run from the run's folder of arms
            path = path.replace("metrics/retrain/", "records/retrain/").removesuffix(".json") + "/"
        assert path in text, f"StudyPaths.{name} gives {path}, which dvc.yaml does not write"


def test_bytecode_caches_leave_stages_up_to_date(tmp_path):
    """Python writes __pycache__/ beside the modules a stage imports (unless
    PYTHONDONTWRITEBYTECODE is set); the project's .dvcignore keeps them out of the hash of a
    folder dep such as src/ncip/core, so the next stage run does not make the others look
    modified. Without those lines the same steps report the dep as changed (the check can fail)."""
    import shutil
    import subprocess
    import sys

    from helpers import dvc_env

    env = {k: v for k, v in dvc_env().items() if k != "PYTHONDONTWRITEBYTECODE"}
    dvc = [sys.executable, "-m", "dvc"]

    def run(*cmd: str) -> str:
        r = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True)
        assert r.returncode == 0, r.stdout + r.stderr
        return r.stdout + r.stderr

    (tmp_path / "src" / "pkg").mkdir(parents=True)
    (tmp_path / "src" / "pkg" / "__init__.py").write_text("VALUE = 1\n")
    (tmp_path / "dvc.yaml").write_text(
        "stages:\n  s:\n    cmd: python -c \"import sys; sys.path.insert(0, 'src'); import pkg;"
        " open('out.txt', 'w').write(str(pkg.VALUE))\"\n    deps: [src/pkg]\n    outs: [out.txt]\n"
    )
    run("git", "init", "-q")
    run(*dvc, "init", "-q")
    for with_ignore in (True, False):
        ignore = (ROOT / ".dvcignore").read_text() if with_ignore else ""
        (tmp_path / ".dvcignore").write_text(ignore)
        cache = tmp_path / "src" / "pkg" / "__pycache__"
        shutil.rmtree(cache, ignore_errors=True)
        run(*dvc, "repro", "-f")
        if not cache.exists():  # the stage's own import wrote it (before DVC hashed the dep)
            run(sys.executable, "-c", "import sys; sys.path.insert(0, 'src'); import pkg")
        assert any(cache.glob("*.pyc"))
        # a later stage (here: another interpreter) imports the package again, or another module
        (cache / f"extra.cpython-{sys.version_info[0]}{sys.version_info[1]}.pyc").write_bytes(b"x")
        out = run(*dvc, "status")
        assert ("up to date" in out) is with_ignore, out


def _stage_names(root: Path) -> set[str]:
    from dvc.repo import Repo

    with Repo(str(root)) as repo:
        return {s.name for s in repo.index.stages}


def test_the_committed_lock_holds_only_this_pipelines_stages():
    """DVC rereads and rewrites dvc.lock after every stage, so entries of stages the pipeline no
    longer has (old subjects, renamed stages) slow every stage down; `make repro` prunes them."""
    lock = yaml.safe_load((ROOT / "dvc.lock").read_text())["stages"]
    assert set(lock) == _stage_names(ROOT)


def test_prune_lock_drops_stale_entries_and_keeps_the_rest_byte_for_byte(tmp_path):
    import subprocess
    import sys

    from helpers import dvc_env

    env = dvc_env()

    def run(*cmd) -> str:
        r = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True)
        assert r.returncode == 0, r.stdout + r.stderr
        return r.stdout + r.stderr

    (tmp_path / "params.yaml").write_text("items: [a, b, c]\n")
    (tmp_path / "dvc.yaml").write_text(
        "stages:\n  s:\n    matrix:\n      name: ${items}\n"
        "    cmd: echo ${item.name} > out-${item.name}.txt\n"
        "    outs:\n      - out-${item.name}.txt\n"
    )
    run("git", "init", "-q")
    run(sys.executable, "-m", "dvc", "init", "-q")
    run(sys.executable, "-m", "dvc", "repro")
    (tmp_path / "params.yaml").write_text("items: [a, c]\n")
    run(sys.executable, "-m", "dvc", "repro")  # DVC itself keeps s@b's entry
    assert "s@b" in yaml.safe_load((tmp_path / "dvc.lock").read_text())["stages"]
    prune = [sys.executable, str(ROOT / "scripts" / "prune_lock.py"), str(tmp_path)]
    assert "dropped 1 entries" in run(*prune)
    lock = (tmp_path / "dvc.lock").read_text()
    assert set(yaml.safe_load(lock)["stages"]) == {"s@a", "s@c"} == _stage_names(tmp_path)
    assert "up to date" in run(sys.executable, "-m", "dvc", "status")
    run(*prune)  # nothing stale: the file is left as it is
    assert (tmp_path / "dvc.lock").read_text() == lock


def test_the_tracked_inputs_are_the_files_dvc_yaml_reads_from_git():
    """ncip.study.paths.TRACKED_INPUTS (what a copy of the project needs besides the code) is
    every metrics/*.md the report reads, and data/external's placeholder."""
    from ncip.study.paths import TRACKED_INPUTS

    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    deps = stages["report"]["deps"]
    tracked = {d for d in deps if d.startswith("metrics/") and d.endswith(".md")}
    assert set(TRACKED_INPUTS) == tracked | {"data/external/README.md"}
    assert all((ROOT / f).is_file() for f in TRACKED_INPUTS)
    # and the experiments' numbers in dvc.yaml's metrics list that no stage writes
    from ncip.study.paths import EXPERIMENT_METRICS

    listed = yaml.safe_load((ROOT / "dvc.yaml").read_text())["metrics"]
    outs = {str(o) for st in stages.values() for o in st.get("outs", []) if isinstance(o, str)}
    outs |= {k for st in stages.values() for o in st.get("outs", []) if isinstance(o, dict)
             for k in o}  # fmt: skip
    assert set(EXPERIMENT_METRICS) == {m for m in listed if m not in outs and "/" in m} - {
        m for m in listed if any(m.startswith(o) for o in outs)
    }
    assert all((ROOT / f).is_file() for f in EXPERIMENT_METRICS)
