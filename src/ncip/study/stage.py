"""Support for the thin stage scripts in ``stages/``: clean failures and atomic directory output.

A stage validates everything before it writes anything, and writes each output atomically, so
bad input exits nonzero with a one-line message and leaves existing outputs untouched.
"""

from __future__ import annotations

import atexit
import functools
import json
import logging
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ncip.core.collapse import Selection
from ncip.core.errors import InputError, NcipError, user_errors
from ncip.core.logs import setup_logging

# When set to a file path, every stage appends {"argv": ..., "reads": [...]} to it: the files
# under the working folder that it opened for reading (the end-to-end test checks that each is
# a declared DVC dependency of that stage).
RECORD_READS = "NCIP_RECORD_READS"


class StageError(NcipError):
    """A problem with a stage's input that the user must fix; the message says how."""


def stage_main(fn: Callable) -> Callable:
    """Wrap a typer command: log to stderr; a user's error (:class:`NcipError`) becomes one line
    and exit code 2, anything else (a bug) keeps its traceback."""
    checked = user_errors(fn)

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        setup_logging(logging.INFO)
        if os.environ.get(RECORD_READS):
            _record_reads(Path(os.environ[RECORD_READS]))
        return checked(*args, **kwargs)

    return wrapper


def _record_reads(log_file: Path) -> None:
    root = Path.cwd().resolve()
    reads: set[str] = set()

    def hook(event: str, args: tuple) -> None:
        if event != "open" or not isinstance(args[0], str | Path):
            return
        mode = args[1] if len(args) > 1 and isinstance(args[1], str) else "r"
        if any(c in mode for c in "wax+"):
            return
        p = Path(os.fsdecode(args[0]))
        p = (p if p.is_absolute() else root / p).resolve()
        if (
            root in p.parents
            and p.is_file()
            and "__pycache__" not in p.parts
            and p.suffix != ".py"
            and Path(sys.prefix).resolve() not in p.parents  # the venv's own files
        ):
            reads.add(str(p.relative_to(root)))

    def dump() -> None:
        with open(log_file, "a") as f:
            f.write(json.dumps({"argv": sys.argv, "reads": sorted(reads)}) + "\n")

    sys.addaudithook(hook)
    atexit.register(dump)


def check_outputs(*files: Path | None, dirs: Sequence[Path | None] = ()) -> None:
    """Refuse, before any work, output paths that cannot be written: a file output that is an
    existing folder, a folder output that is an existing file, a parent that is a file."""
    for path, want_dir in [(f, False) for f in files] + [(d, True) for d in dirs]:
        if path is None:
            continue
        path = Path(path)
        if path.exists() and path.is_dir() != want_dir:
            kind = "a folder" if path.is_dir() else "a file"
            raise StageError(
                f"output {path} is {kind}; give a {'folder' if want_dir else 'file'} "
                "path (or move what is there)"
            )
        for parent in path.parents:
            if parent.exists():
                if not parent.is_dir():
                    raise StageError(f"cannot write {path}: {parent} is a file, not a folder")
                break


def read_record(path: Path, made_by: str, keys: Sequence[str] = ()) -> dict:
    """A JSON record another stage wrote; StageError naming the file and that stage if it is
    missing, unreadable or lacks ``keys``."""
    path = Path(path)
    if not path.is_file():
        raise StageError(f"{path} does not exist; run {made_by} first")
    try:
        record = json.loads(path.read_text())
    except ValueError as e:
        raise StageError(f"{path} is not valid JSON ({e}); run {made_by} again") from None
    missing = [k for k in keys if not isinstance(record, dict) or k not in record]
    if missing:
        raise StageError(f"{path} lacks {', '.join(missing)}; run {made_by} again")
    return record


@dataclass(frozen=True)
class SelectionRecord:
    """What select-checkpoints writes for one run and score-ncip and analyze-checkpoints read:
    NCIP's :class:`~ncip.core.collapse.Selection` with the run it belongs to and its seconds."""

    selection: Selection
    subject: str
    run: int
    seconds: float

    def write(self, path: Path) -> None:
        from ncip.core.io import write_json

        write_json(
            path,
            {
                **self.selection.to_record(),
                "seconds": self.seconds,
                "subject": self.subject,
                "run": self.run,
            },
        )

    @classmethod
    def read(cls, path: Path) -> SelectionRecord:
        """StageError naming the file when it is missing, not JSON or not a selection."""
        record = read_record(path, "select-checkpoints", ["subject", "run", "seconds"])
        try:
            selection = Selection.from_record(record)
        except InputError as e:
            raise StageError(f"{path}: {e}; run select-checkpoints again") from None
        return cls(selection, str(record["subject"]), int(record["run"]), float(record["seconds"]))


def split_list(value: str) -> list[str]:
    """Parse a comma-separated option (DVC cannot interpolate lists into a command)."""
    return [v.strip() for v in value.split(",") if v.strip()]


def read_records(folder: Path | None, files: dict[str, str], made_by: str) -> dict[str, dict]:
    """key -> record for each ``files[key]`` that exists in ``folder`` (absent ones skipped)."""
    if folder is None or not Path(folder).is_dir():
        return {}
    return {
        key: read_record(Path(folder) / name, made_by)
        for key, name in files.items()
        if (Path(folder) / name).exists()
    }


def default(config_class: type, name: str) -> Any:
    """A library config dataclass's default for ``name``: the one home of a stage option's
    default (the study's own value comes from params.yaml)."""
    import dataclasses

    for f in dataclasses.fields(config_class):
        if f.name == name:
            if f.default is dataclasses.MISSING:
                raise TypeError(f"{config_class.__name__}.{name} has no default")
            return f.default
    raise AttributeError(f"{config_class.__name__} has no field {name!r}")


def torchrun_if_asked(nproc: int) -> None:
    """With ``nproc`` > 1 and not already under torchrun, run this same command under
    torchrun (one node, ``nproc`` processes: ``torch.distributed.run --standalone``) and exit
    with its status. Under a torchrun the caller started itself (several nodes), do nothing."""
    import subprocess

    if nproc <= 1 or "LOCAL_RANK" in os.environ:
        return
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc-per-node={nproc}",
        "--",  # our options are never read as torchrun's (argparse matches abbreviations)
        sys.argv[0],
        *sys.argv[1:],
    ]
    raise SystemExit(subprocess.call(cmd))


def is_rank_zero() -> bool:
    """True unless this is a non-zero rank of a torchrun launch (those write no outputs)."""
    return int(os.environ.get("RANK", "0")) == 0


def flag(value: str) -> bool:
    """A boolean stage option as DVC writes a params value into a command (true/false)."""
    v = str(value).strip().lower()
    if v in ("true", "1", "yes", "on"):
        return True
    if v in ("false", "0", "no", "off"):
        return False
    raise InputError(f"expected true or false, got {value!r}")
