"""Drop the entries of dvc.lock whose stages the pipeline no longer has.

DVC keeps a stage's lock entry after the stage leaves dvc.yaml (a subject removed from
``subjects``, a run from ``runs``, a stage renamed), and it reads and rewrites the whole lock
after every stage it runs: stale entries made each stage of the default study pay for 153 entries
instead of 59 (docs/performance.md, "DVC's own time"). Nothing is lost: a stage that comes back
finds its outputs in DVC's run-cache. `make repro` runs this before `dvc repro`.

    .venv/bin/python scripts/prune_lock.py [project root]
"""

import sys
from pathlib import Path


def prune(root: Path) -> list[str]:
    """Remove the stale entries of root/dvc.lock; return their names (the file is rewritten
    only when there are some)."""
    from dvc.repo import Repo
    from dvc.utils.serialize import load_yaml, modify_yaml

    lock = root / "dvc.lock"
    if not lock.exists():
        return []
    dvcyaml = (root / "dvc.yaml").resolve()
    with Repo(str(root)) as repo:
        names = {s.name for s in repo.index.stages if Path(s.path).resolve() == dvcyaml}
    stale = [k for k in load_yaml(lock).get("stages", {}) if k not in names]
    if stale:
        with modify_yaml(lock) as data:
            for k in stale:
                del data["stages"][k]
    return stale


if __name__ == "__main__":
    root = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    dropped = prune(root)
    if dropped:
        print(f"dvc.lock: dropped {len(dropped)} entries of stages no longer in dvc.yaml")
