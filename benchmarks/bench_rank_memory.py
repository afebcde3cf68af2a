"""Peak memory of `ncip.rank` (streamed) against holding every checkpoint's probabilities.

A synthetic run: an MLP (32 -> 64 -> C) whose checkpoints drift towards the final one, and a
memory-mapped float32 `.npy` test set of N inputs. Each variant runs in a fresh subprocess that
reports the growth of its peak resident memory (ru_maxrss) during ranking alone (after imports):

- "streamed": ncip.rank, which keeps the final checkpoint's probabilities (N x C float64) and
  one batch at a time;
- "in memory": the same selected checkpoints' probabilities stacked into K x N x C float64 and
  scored with ncip.study.scores.ncip_score, as `ncip rank` did before.

    .venv/bin/python benchmarks/bench_rank_memory.py                  # N=200k, C=100, K=20
    .venv/bin/python benchmarks/bench_rank_memory.py --n 50000 --streamed-only
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import typer


def _mib(kib: int) -> float:
    return kib / 1024.0


def make_run(d: Path, n: int, classes: int, checkpoints: int, seed: int = 0) -> None:
    """Write `checkpoints` state dicts (epoch_1.pt ...) and an `x.npy` of n inputs into d."""
    import numpy as np
    import torch

    torch.manual_seed(seed)
    final = _mlp(classes).state_dict()
    for e in range(1, checkpoints + 1):
        drift = (checkpoints - e) / checkpoints
        sd = {k: v + 0.3 * drift * torch.randn_like(v) for k, v in final.items()}
        torch.save(sd, d / f"epoch_{e}.pt")
    rng = np.random.default_rng(seed)
    x = np.lib.format.open_memmap(d / "x.npy", mode="w+", dtype=np.float32, shape=(n, 32))
    for i in range(0, n, 50_000):
        x[i : i + 50_000] = rng.standard_normal((min(50_000, n - i), 32), dtype=np.float32)
    x.flush()


def _mlp(classes: int):
    import torch.nn as nn

    return nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, classes))


def worker(d: str, classes: int, k: int, variant: str) -> None:
    """Run one variant in this process; print a JSON line with the peak-memory growth."""
    import numpy as np

    import ncip
    from ncip.core.scores import softmax64
    from ncip.tool.formats import discover

    factory = lambda num_classes=classes: _mlp(num_classes)  # noqa: E731
    x = np.load(Path(d) / "x.npy", mmap_mode="r")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    r = ncip.rank(d, Path(d) / "x.npy", factory, k=k, batch_size=4096, show_progress=False)
    if variant == "in-memory":
        import torch

        from ncip.core.scores import ncip_score

        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # after the streamed run
        t0 = time.perf_counter()
        model = factory()
        used = [Path(p) for p in r.selection["used"]]
        cs = {c.path: c for c in discover(d)}
        probs = []
        for p in used:
            sd = torch.load(cs[p].path, weights_only=True)
            model.load_state_dict(sd)
            with torch.inference_mode():
                z = torch.cat(
                    [
                        model(torch.from_numpy(np.array(x[i : i + 4096])))
                        for i in range(0, len(x), 4096)
                    ]
                ).numpy()
            probs.append(softmax64(z))
        score = ncip_score(np.stack(probs))
        assert np.allclose(np.sort(score), np.sort(r.table["ncip"].to_numpy()), atol=1e-9)
    seconds = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(
        json.dumps(
            {
                "variant": variant,
                "growth_kib": after - before,
                "peak_kib": after,
                "seconds": seconds,
                "k": len(r.selection["used"]),
            }
        )
    )


def main(
    n: int = typer.Option(200_000, help="test inputs"),
    classes: int = typer.Option(100, help="classes C"),
    k: int = typer.Option(20, help="checkpoints NCIP selects"),
    streamed_only: bool = typer.Option(False, help="skip the in-memory variant"),
) -> None:
    checkpoints = k + k // 5 + 2  # a pool (alpha = 0.9) larger than K, so selection selects
    with tempfile.TemporaryDirectory() as d:
        make_run(Path(d), n, classes, checkpoints)
        rows = []
        for variant in ["streamed"] + ([] if streamed_only else ["in-memory"]):
            out = subprocess.run(
                [sys.executable, __file__, "worker", d, str(classes), str(k), variant],
                capture_output=True,
                text=True,
                check=True,
            )
            rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    nc = n * classes * 8 / 2**20
    print(
        f"N = {n}, C = {classes}, K = {rows[0]['k']} of {checkpoints} checkpoints; float64 "
        f"probabilities: N x C = {nc:.0f} MiB, K x N x C = {rows[0]['k'] * nc:.0f} MiB"
    )
    print(
        f"{'variant':<10} | {'peak RSS growth (MiB)':>21} | {'x (N x C)':>9} | "
        f"{'x (K x N x C)':>13} | {'seconds':>7}"
    )
    print("-" * 73)
    for r in rows:
        g = _mib(r["growth_kib"])
        print(
            f"{r['variant']:<10} | {g:>21.0f} | {g / nc:>9.2f} | {g / (r['k'] * nc):>13.3f} | "
            f"{r['seconds']:>7.1f}"
        )


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        worker(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5])
    else:
        typer.run(main)
