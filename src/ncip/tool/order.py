"""The training order of a run's checkpoints: what the files record (the step, else the epoch),
else the number in their names; a list of files keeps the order it was given in, unless the
files record another, it is sorted by name as a shell expands an unquoted glob, or it runs
exactly backwards (newest first, as ``ls -t`` lists)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ncip.core.checkpoints import CheckpointError

if TYPE_CHECKING:
    from ncip.tool.formats import Checkpoint

ORDERS = ("auto", "given")


def natural_key(name: str) -> list:
    return [int(t) if t.isdigit() else t.lower() for t in re.split(r"(\d+)", name)]


def _name_number(name: str) -> int | None:
    nums = re.findall(r"\d+", Path(name).name)
    return int(nums[-1]) if nums else None


def list_order(found: list[Checkpoint], label: str) -> tuple[list[Checkpoint], str]:
    """A list of files in training order: as listed, unless the files record a step or epoch
    that orders them otherwise (that order wins), or the list is sorted by name as a shell
    expands an unquoted glob (``epoch_1, epoch_10, epoch_2``) while a number in the names
    orders it otherwise (that number wins); each time the order says so."""
    recorded = _recorded_order(found)
    if recorded is not None:
        ordered, how = recorded
        if ordered != found:
            how += " (not the order listed; --order given keeps the list as typed)"
        return ordered, how
    names = [c.name for c in found]
    if len(found) > 2:  # newest first, as `ls -t` lists: the training order reversed
        try:
            ordered, how = training_order(found, label)
        except CheckpointError:
            ordered = None
        if ordered is not None and ordered == found[::-1]:
            return ordered, (
                f"{how}: the list ran from the last checkpoint back (as `ls -t` lists newest "
                "first); --order given keeps the list as typed"
            )
    if len(found) > 1 and names == sorted(names):
        try:
            ordered, how = training_order(found, label)
        except CheckpointError:
            return found, "the order given"
        if ordered != found:
            return ordered, (
                f"{how}: the list was sorted by name, as a shell expands an unquoted glob "
                "(quote it, 'ckpt/epoch_*.pt'); --order given keeps the list as typed"
            )
    return found, "the order given"


def _recorded_order(found: list[Checkpoint]) -> tuple[list[Checkpoint], str] | None:
    """The order of the step, else the epoch, that every file records (distinct values). Two
    files recording the same step hold different weights (copies were set aside before): a
    re-save such as Lightning's ``-v1``, or two runs; refused, not ordered by name."""
    steps = [c.step for c in found]
    if all(v is not None for v in steps) and len(set(steps)) < len(steps):
        dup = next(v for v in steps if steps.count(v) > 1)
        same = [c.name for c in found if c.step == dup]
        raise CheckpointError(
            f"{' and '.join(same[:3])} record the same step {dup} with different weights (a "
            "re-save, such as Lightning's -v1 files, or checkpoints of two runs): ncip cannot "
            "tell which is the training history; keep one of them"
        )
    for attr, words in (("step", "the step"), ("epoch", "the epoch")):
        values = [getattr(c, attr) for c in found]
        if all(v is not None for v in values) and len(set(values)) == len(values):
            return sorted(found, key=lambda c: getattr(c, attr)), f"{words} recorded in each file"
    return None


def warn_if_contradicted(found: list[Checkpoint]) -> None:
    """Warn where a given order contradicts the step (or epoch) every file records."""
    from ncip.core.logs import log

    for attr in ("step", "epoch"):
        values = [getattr(c, attr) for c in found]
        if all(v is not None for v in values):
            for i in range(1, len(found)):
                if values[i] <= values[i - 1]:
                    log.warning(
                        "the order given puts %s (%s %s) after %s (%s %s); ranking in the "
                        "order given",
                        found[i].name,
                        attr,
                        values[i],
                        found[i - 1].name,
                        attr,
                        values[i - 1],
                    )
                    return
            return


_ORDER_WORDS = ("epoch", "ep", "e", "step", "steps", "iter", "it", "iteration", "checkpoint")


def _name_field(found: list[Checkpoint], label: str) -> tuple[int, list[int], str, int] | None:
    """The number field of the names that orders the files: (its index, its values in the
    order of ``found``, the text before it, the number of fields), where every name has the
    same shape (text between the numbers) and at least two numbers; None otherwise. The field
    varies one-to-one; a field named like an epoch or step wins, else the first."""
    parts = [re.split(r"(\d+)", c.name) for c in found]
    shapes = {tuple(p[0::2]) for p in parts}
    if len(shapes) != 1 or len(parts[0]) // 2 < 2:
        return None  # one number per name: the natural order
    texts = parts[0][0::2]
    fields = []
    for i in range(len(parts[0]) // 2):
        values = [int(p[2 * i + 1]) for p in parts]
        before = texts[i]
        decimal = before == "." and i > 0  # the fraction of a number such as acc0.93
        if len(set(values)) == len(values) and not decimal:
            word = re.sub(r"[^a-z]", " ", before.lower()).split()
            fields.append((bool(word) and word[-1] in _ORDER_WORDS, i, values, before))
    if not fields:
        return None
    fields.sort(key=lambda f: (not f[0], f[1]))
    _, i, values, before = fields[0]
    for _, _, other, other_before in fields[1:]:
        if np.argsort(other).tolist() != np.argsort(values).tolist():
            names = ", ".join(c.name for c in found[:3])
            raise CheckpointError(
                f"cannot tell the training order in {label}: the numbers after "
                f"{before.strip('_-') or 'the start'!r} and {other_before.strip('_-')!r} in the "
                f"names ({names}, ...) order the files differently; pass the files in training "
                "order as a list (--order given)"
            )
    return i, values, before, len(parts[0]) // 2


def _field_words(before: str) -> str:
    return f"after {before.strip('_-')!r}" if before.strip("_-") else "at the start"


def _name_field_order(found: list[Checkpoint], label: str) -> tuple[list[Checkpoint], str] | None:
    """Order by the number field of :func:`_name_field`; None where the names have no such
    field."""
    field = _name_field(found, label)
    if field is None:
        return None
    i, values, before, count = field
    ordered = [found[j] for j in np.argsort(values, kind="stable")]
    return (
        ordered,
        f"the number {_field_words(before)} in each file name (field {i + 1} of {count})",
    )


def training_order(found: list[Checkpoint], label: str) -> tuple[list[Checkpoint], str]:
    recorded = _recorded_order(found)
    if recorded is not None:
        return recorded
    by_field = _name_field_order(found, label) if len(found) > 1 else None
    if by_field is not None:
        return by_field
    nums = [_name_number(c.name) for c in found]
    if len(found) > 1 and any(n is None for n in nums):
        bad = [c.name for c, n in zip(found, nums, strict=True) if n is None]
        raise CheckpointError(
            f"cannot tell the training order in {label}: {', '.join(bad[:3])} records no epoch "
            "or step and has no number in its name; name files by epoch (epoch_3.pt) or pass "
            "them in training order as a list (--order given)"
        )
    if len(set(nums)) != len(nums):
        dup = sorted({n for n in nums if nums.count(n) > 1})
        same = [c.name for c, n in zip(found, nums, strict=True) if n == dup[0]]
        raise CheckpointError(
            f"cannot tell the training order in {label}: {', '.join(same[:4])} carry the same "
            "number in their names and record no distinct epoch or step; pass the files in "
            "training order as a list (--order given)"
        )
    ordered = sorted(found, key=lambda c: natural_key(c.name))
    return ordered, "the number in each file name (natural order)"


def uneven_history(cs) -> str | None:
    """Why a run's checkpoints (a :class:`ncip.tool.formats.CheckpointSet` in training order)
    are not an even training history, or None: gaps of unequal size between the steps, epochs
    or name numbers (kept by a metric, or thinned; the last gap may be shorter, a final save
    between regular ones), or a Lightning ``ModelCheckpoint`` with a ``monitor`` that did not
    keep the first epoch. NCIP's candidate pool ("the last alpha of training") means what it
    says only on an even history."""
    if len(cs) < 3:
        return None
    for attr in ("step", "epoch"):
        keys = [getattr(c, attr) for c in cs]
        if all(k is not None for k in keys):
            break
    else:
        # the number the order reads (model-e07-acc0.93.pt: the epoch field, not the accuracy)
        try:
            field = _name_field(list(cs), "the checkpoints")
        except CheckpointError:
            field = None
        if field is not None:
            keys, attr = field[1], f"number {_field_words(field[2])} in the file name"
        else:
            numbers = [re.findall(r"\d+", c.name) for c in cs]
            if not all(numbers):
                return None  # no numbers to tell (a list given in its own order)
            keys = [int(n[-1]) for n in numbers]
            attr = "number in the file name"
    gaps = np.diff(keys)
    if len(set(gaps[:-1].tolist())) > 1 or (len(gaps) > 1 and gaps[-1] > gaps[0]):
        return (
            f"the checkpoints are not an even history ({attr}s {keys[:8]}"
            f"{' ...' if len(keys) > 8 else ''}): they look chosen by a metric or thinned"
        )
    if cs.final.fmt == "container":
        monitor = _lightning_monitor(cs.final)
        if monitor and cs[0].epoch not in (None, 0, 1):
            return (
                f"Lightning kept these checkpoints by {monitor!r} (a ModelCheckpoint monitor), "
                "not every epoch"
            )
    return None


def _lightning_monitor(ck) -> str | None:
    from ncip.tool.unpickle import torch_load

    obj = torch_load(ck.path)
    for key in (obj.get("callbacks") or {}) if isinstance(obj, dict) else {}:
        m = re.search(r"ModelCheckpoint\{.*'monitor': '([^']+)'", str(key))
        if m:
            return m.group(1)
    return None


def late_start(cs) -> str | None:
    """A note where an even history does not start at the beginning of training (the first
    checkpoints deleted, e.g. by the Trainer's ``save_total_limit`` or a ``keep_last`` rule):
    the pool is then the last alpha of what is left, not of training. None otherwise."""
    if len(cs) < 2:
        return None
    for attr in ("epoch", "step"):
        keys = [getattr(c, attr) for c in cs]
        if all(k is not None for k in keys):
            gap = keys[1] - keys[0]
            first = 1 if attr == "epoch" else gap
            if gap > 0 and keys[0] > first + (0 if attr == "step" else gap - 1):
                gone = (keys[0] - first) // gap
                return (
                    f"these {len(cs)} checkpoints start at {attr} {keys[0]}: about {gone} "
                    f"earlier one(s) are gone (a save_total_limit?), so NCIP's pool is the last "
                    f"alpha of the {len(cs)} here, not of training"
                )
            return None
    return None
