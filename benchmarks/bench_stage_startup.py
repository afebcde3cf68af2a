"""Start-up time of the light study stages: the seconds before a stage does any work (its
imports, then `--help`), and whether PyTorch was imported. Every stage item pays this once,
and a K experiment runs about twenty light items, so it is a share of `dvc exp run -S k=...`.

Side by side with another commit: check it out in a worktree and name both trees.

    git worktree add /tmp/ncip-old 9e00e95
    .venv/bin/python benchmarks/bench_stage_startup.py --trees .,/tmp/ncip-old

Each tree's stages run with that tree's ``src`` first on PYTHONPATH (the path printed shows
which ``ncip`` was imported); the median of ``--repeats`` runs is shown. Run on an otherwise
idle machine.

``--bytecode`` compares, for the first tree and every stage (the heavy ones too), a start-up
that reads the byte-compiled modules scripts/setup.sh leaves in the venv with one that has no
bytecode at all (an empty PYTHONPYCACHEPREFIX and PYTHONDONTWRITEBYTECODE=1: what every stage
paid when the venv was installed with ``--no-compile`` on a machine that sets
PYTHONDONTWRITEBYTECODE, as Docker's Python images do):

    .venv/bin/python benchmarks/bench_stage_startup.py --bytecode
"""

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import typer

STAGES = (
    "select_checkpoints",
    "score_ncip",
    "analyze_checkpoints",
    "publish_records",
    "evaluate_rauc",
    "report",
)
PROBE = (
    "import runpy, sys\n"
    "sys.argv = [sys.argv[1], '--help']\n"
    "try:\n"
    "    runpy.run_path(sys.argv[0], run_name='__main__')\n"
    "except SystemExit:\n"
    "    pass\n"
    "import ncip\n"
    "print('TORCH' if 'torch' in sys.modules else 'NOTORCH', ncip.__file__)\n"
)


ALL_STAGES = tuple(sorted(p.stem for p in (Path(__file__).parents[1] / "stages").glob("*.py")))


def _once(tree: Path, stage: str, extra: dict | None = None) -> tuple[float, bool, str]:
    env = {**os.environ, "PYTHONPATH": str(tree / "src"), "OMP_NUM_THREADS": "1", **(extra or {})}
    t0 = time.perf_counter()
    r = subprocess.run(
        [sys.executable, "-c", PROBE, str(tree / "stages" / f"{stage}.py")],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    seconds = time.perf_counter() - t0
    flag, where = r.stdout.strip().splitlines()[-1].split(" ", 1)
    return seconds, flag == "TORCH", where


def bytecode(tree: Path, repeats: int) -> None:
    """Every stage's start-up with the venv's bytecode against none at all."""
    with tempfile.TemporaryDirectory() as empty:
        none = {"PYTHONPYCACHEPREFIX": empty, "PYTHONDONTWRITEBYTECODE": "1"}
        print(f"tree {tree}; python {sys.executable}")
        print("| stage | no bytecode (s) | compiled venv (s) | ratio |")
        print("|---|---:|---:|---:|")
        totals = [0.0, 0.0]
        for stage in ALL_STAGES:
            # side by side: the two settings alternate, so drift hits both alike
            pairs = [(_once(tree, stage, none)[0], _once(tree, stage)[0]) for _ in range(repeats)]
            a, b = (statistics.median(x) for x in zip(*pairs, strict=True))
            totals[0] += a
            totals[1] += b
            print(f"| {stage} | {a:.2f} | {b:.2f} | {b / a:.2f} |")
        print(f"| sum | {totals[0]:.2f} | {totals[1]:.2f} | {totals[1] / totals[0]:.2f} |")


def main(
    trees: str = ".", repeats: int = 5, bytecode_: bool = typer.Option(False, "--bytecode")
) -> None:
    roots = [Path(t).resolve() for t in trees.split(",")]
    if bytecode_:
        bytecode(roots[0], repeats)
        return
    for root in roots:
        print(f"tree {root}")
    head = " | ".join(f"{r.name[:18]:>18} s (torch)" for r in roots)
    print(f"{'stage':>20} | {head}")
    print("-" * (23 + 29 * len(roots)))
    totals = [0.0] * len(roots)
    for stage in STAGES:
        cells = []
        for i, root in enumerate(roots):
            runs = [_once(root, stage) for _ in range(repeats)]
            med = statistics.median(s for s, _, _ in runs)
            totals[i] += med
            if not runs[0][2].startswith(str(root)):
                raise SystemExit(f"{root}: imported ncip from {runs[0][2]}, not this tree")
            cells.append(f"{med:18.2f}   ({'yes' if runs[0][1] else 'no'})")
        print(f"{stage:>20} | " + " | ".join(cells))
    print(f"{'sum':>20} | " + " | ".join(f"{t:18.2f}        " for t in totals))


if __name__ == "__main__":
    typer.run(main)
