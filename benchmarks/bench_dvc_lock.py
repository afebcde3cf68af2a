"""DVC's own time per stage: it loads dvc.lock, then rereads it for update and rewrites it after
every stage it runs. This times those three steps with DVC's own functions on a lock file, so
a lock's size and the YAML loader (ruamel.yaml with or without its libyaml extension,
ruamel.yaml.clib) can be compared side by side. Prints a table; timings are medians of 5.

    .venv/bin/python benchmarks/bench_dvc_lock.py dvc.lock [older.lock ...]
"""

import statistics
import sys
import tempfile
import time
from pathlib import Path


def median_seconds(fn, repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def measure(path: str) -> str:
    """One table row: the lock's size and the seconds of each step DVC takes per stage."""
    import ruamel.yaml
    from dvc.utils.serialize import dump_yaml, parse_yaml, parse_yaml_for_update

    text = Path(path).read_text()
    n = len(parse_yaml(text, path).get("stages", {}))
    rt = parse_yaml_for_update(text, path)
    # what parse_yaml does without ruamel.yaml.clib
    pure = median_seconds(lambda: ruamel.yaml.YAML(typ="safe", pure=True).load(text))
    load = median_seconds(lambda: parse_yaml(text, path))
    upd = median_seconds(lambda: parse_yaml_for_update(text, path))
    with tempfile.TemporaryDirectory() as d:
        dump = median_seconds(lambda: dump_yaml(Path(d) / "dvc.lock", rt))
    return (
        f"| {path} | {n} | {len(text) // 1024} | {pure:.2f} | {load:.2f} | {upd:.2f} "
        f"| {dump:.2f} | {load + upd + dump:.2f} | {pure + upd + dump:.2f} |"
    )


def main(paths: list[str]) -> None:
    import ruamel.yaml

    print(f"ruamel.yaml {ruamel.yaml.__version__}, libyaml loader: {ruamel.yaml.__with_libyaml__}")
    print(
        "| lock | entries | KB | load, pure Python (s) | load (s) | parse for update (s) "
        "| dump (s) | per stage (s) | per stage, pure Python (s) |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for p in paths:
        print(measure(p))


if __name__ == "__main__":
    main(sys.argv[1:] or ["dvc.lock"])
