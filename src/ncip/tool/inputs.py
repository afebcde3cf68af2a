"""Test inputs for ranking: files in common formats (their preprocessing for the model:
:mod:`ncip.tool.preprocess`).

Sources: ``.npz`` (``x``, optional ``ids`` and ``y``); ``.npy`` (memory-mapped, so a test set
larger than memory can be ranked); ``.pt``/``.pth`` written by ``torch.save`` (a tensor, or a
dict with ``x`` and optional ``y`` and ``ids``; read with ``weights_only=True``); a table
(``.csv``, ``.tsv``, ``.parquet``: one row per input, every numeric column a feature in the
table's order, except a label column ``y``/``label`` and an id column ``id``/``ids``/``sample_id``,
or the columns that ``labels``/``ids`` name; a table whose one other column holds texts is raw
texts); raw texts (``.txt``, ``.jsonl``: :mod:`ncip.tool.texts`, encoded with the model's own
tokenizer); a folder of images in torchvision's ImageFolder layout (one subfolder per class,
sorted names = class indices) or a flat folder of images; or an array.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ncip.core.errors import InputError
from ncip.tool.images import ImageFiles, image_folder
from ncip.tool.messages import reason


@dataclass
class Inputs:
    """Inputs to rank, with their ids and (optionally) labels."""

    x: Any  # np.ndarray, a memory map, or ImageFiles
    ids: np.ndarray  # str, one per input
    y: np.ndarray | None = None
    source: str = "array"  # the file or folder read (outputs must never replace it)
    class_names: list[str] | None = None
    detail: str = ""  # how a table's columns were read, for the run's notes
    texts: list[str] | None = None  # raw texts, until encoded (ncip.tool.texts.encode_texts)
    pad_id: int | None = None  # the padding id the texts were encoded with (attention mask)
    raw_texts: list[str] | None = None  # the texts as read, kept after encoding (Label Studio)

    def __len__(self) -> int:
        return len(self.x)


def _regular_or_folder(path: Path, what: str) -> None:
    """Refuse what is neither a regular file nor a folder (a FIFO would block the read for
    ever, a device would never end)."""
    if not (path.is_file() or path.is_dir()):
        raise InputError(
            f"{what} {path} is not a regular file (a named pipe, socket or device): reading it "
            "could block for ever; give a file (copy the pipe's contents to one first)"
        )


def _read_array(path: Path, what: str) -> np.ndarray:
    if not path.exists():
        raise InputError(f"{what} file {path} does not exist")
    _regular_or_folder(path, what)
    if path.is_dir():
        raise InputError(f"{what} file {path} is a folder; give a file")
    try:
        if path.suffix == ".npy":
            return np.load(path, allow_pickle=False)
        if path.suffix in (".txt", ".csv"):
            return _one_value_per_line(path, what)
    except InputError:
        raise
    except (ValueError, OSError, EOFError) as e:
        raise InputError(f"{path} cannot be read as {what} ({e or 'empty file'})") from None
    raise InputError(f"{what} file {path}: use .npy, or .txt with one value per line")


def _one_value_per_line(path: Path, what: str) -> np.ndarray:
    """The values of a one-column text file; a header line (``label``, ``id``: what pandas'
    ``to_csv`` writes first) is dropped, a file of several columns refused."""
    lines = [ln.strip() for ln in path.read_text().splitlines() if ln.strip()]
    if lines and any(sep in lines[-1] for sep in (",", "\t")):
        raise InputError(
            f"{what} file {path} has several columns ({lines[0]!r} ...); give one value per line "
            "(pandas: to_csv(path, index=False)), or pass the table as --inputs and name its "
            f"column with --{what}"
        )
    header = LABEL_COLUMNS if what == "labels" else ID_COLUMNS
    if lines and lines[0].lower() in header:
        lines = lines[1:]
    return np.array(lines)


def load_inputs(
    source: str | Path | np.ndarray | Inputs,
    ids: str | Path | Sequence | np.ndarray | None = None,
    labels: str | Path | Sequence | np.ndarray | None = None,
    text_column: str | None = None,
) -> Inputs:
    """Read inputs (see the module docstring); ``ids``/``labels`` override what the file holds;
    ``text_column`` names a table's column of raw texts (the others but the label and id
    columns are then left out)."""
    if text_column is not None and not (
        isinstance(source, str | Path) and Path(source).suffix.lower() in TABLE_SUFFIXES
    ):
        raise InputError(
            f"--text-column names a column of a table (.csv, .tsv, .parquet); {source} is not "
            "one: drop --text-column"
        )
    if isinstance(source, Inputs):
        inp = source
    elif isinstance(source, np.ndarray):
        inp = Inputs(source, np.arange(len(source)).astype(str))
    else:
        path = Path(source)
        if path.is_symlink() and not path.exists():
            raise InputError(
                f"inputs {path} is a symbolic link to nothing readable (a loop, or a missing "
                "target); give the file itself"
            )
        if not path.exists():
            raise InputError(f"inputs {path} do not exist")
        _regular_or_folder(path, "inputs")
        if path.is_dir():
            files, y, names = image_folder(path)
            inp = Inputs(
                ImageFiles(files),
                np.array([str(f.relative_to(path)) for f in files]),
                y,
                str(path),
                names,
            )
        elif path.suffix == ".npz":
            inp = _load_npz(path)
        elif path.suffix == ".npy":
            try:
                x = np.load(path, mmap_mode="r", allow_pickle=False)
            except (ValueError, OSError, EOFError) as e:
                raise InputError(f"{path} cannot be read as an array ({e})") from None
            if x.ndim == 0:
                raise InputError(f"{path} holds one number, not a batch of inputs [N, ...]")
            inp = Inputs(x, np.arange(len(x)).astype(str), None, str(path))
        elif path.suffix in TORCH_SUFFIXES:
            inp = _load_torch(path)
        elif path.suffix.lower() in TABLE_SUFFIXES:
            inp, ids, labels = _load_table(path, ids, labels, text_column)
        elif path.suffix.lower() in TEXT_SUFFIXES:
            inp = _load_texts(path)
        else:
            raise InputError(
                f"inputs {path}: use an .npz (x, optional ids and y), an .npy, a .pt/.pth "
                "saved with torch.save, a table (.csv, .tsv, .parquet), raw texts (.txt, "
                ".jsonl) or a folder of images"
            )
    if ids is not None:
        inp.ids = np.asarray(
            _read_array(Path(ids), "ids") if isinstance(ids, str | Path) else ids
        ).astype(str)
    if labels is not None:
        inp.y = np.asarray(
            _read_array(Path(labels), "labels") if isinstance(labels, str | Path) else labels
        )
    if len(inp) == 0:
        raise InputError(f"{inp.source} holds no inputs")
    return inp


TORCH_SUFFIXES = (".pt", ".pth")
TABLE_SUFFIXES = (".csv", ".tsv", ".parquet")
TEXT_SUFFIXES = (".txt", ".jsonl")  # raw texts (ncip.tool.texts)
# the columns of a table taken as labels and ids unless --labels / --ids name others
LABEL_COLUMNS = ("y", "label")
ID_COLUMNS = ("id", "ids", "sample_id")


def _column_arg(arg: Any, columns: list[str]) -> str | None:
    """The column an ``ids``/``labels`` argument names (a string or path that is no file)."""
    if isinstance(arg, str | Path) and not Path(arg).exists() and str(arg) in columns:
        return str(arg)
    return None


def _pick_column(path: Path, columns: list[str], names: tuple[str, ...], what: str, flag: str):
    found = [c for c in columns if c.lower() in names]
    if len(found) > 1:
        raise InputError(
            f"{path} has several {what} columns ({', '.join(found)}); name one with {flag} COLUMN"
        )
    return found[0] if found else None


def _load_table(
    path: Path, ids: Any, labels: Any, text_column: str | None = None
) -> tuple[Inputs, Any, Any]:
    """Inputs from a table: (inputs, the ids and labels arguments left to apply)."""
    import pandas as pd

    try:
        if path.suffix.lower() == ".parquet":
            df = pd.read_parquet(path)
        else:
            df = pd.read_csv(path, sep="\t" if path.suffix.lower() == ".tsv" else ",")
    except Exception as e:  # noqa: BLE001  (pandas and pyarrow raise many types for bad files)
        first = reason(e)
        raise InputError(f"{path} cannot be read as a table ({first})") from None
    columns = [str(c) for c in df.columns]
    df.columns = columns
    if not len(df):
        raise InputError(f"{path} has a header ({', '.join(columns[:6])}) and no rows")
    index = columns[0] if columns[0] == "Unnamed: 0" else None
    if index is not None and ids is None and not any(c in columns for c in ID_COLUMNS):
        ids = index  # pandas' own index column (to_csv without index=False): the ids, said
    label_col = _column_arg(labels, columns)
    id_col = _column_arg(ids, columns)
    for arg, col, what in ((labels, label_col, "labels"), (ids, id_col, "ids")):
        if isinstance(arg, str | Path) and col is None and not Path(arg).exists():
            shown = ", ".join(columns[:8]) + (" ..." if len(columns) > 8 else "")
            raise InputError(
                f"{what} {str(arg)!r} is neither a file nor a column of {path} (columns: {shown})"
            )
    own = [c for c in columns if c in LABEL_COLUMNS]
    if labels is not None and label_col is None and own:
        raise InputError(
            f"{path} has its own label column {own[0]!r} and --labels gives {labels}; give one "
            f"of them (drop --labels, or --labels {own[0]} to name the column)"
        )
    if label_col is None and labels is None:
        label_col = _pick_column(path, columns, LABEL_COLUMNS, "label", "--labels")
    if id_col is None and ids is None:
        id_col = _pick_column(path, columns, ID_COLUMNS, "id", "--ids")
    features = [c for c in columns if c not in (label_col, id_col)]
    text = [c for c in features if not pd.api.types.is_numeric_dtype(df[c])]
    left_out = ""
    if text_column is not None:
        if text_column not in columns or text_column in (label_col, id_col):
            shown = ", ".join(columns[:8]) + (" ..." if len(columns) > 8 else "")
            raise InputError(
                f"--text-column {text_column!r} is not a text column of {path} (columns: {shown})"
            )
        others = [c for c in features if c != text_column]
        features = text = [text_column]
        left_out = f"; left out: {', '.join(others)}" if others else ""
    elif len(text) > 1 and text == features:
        raise InputError(
            f"{path} has {len(text)} text columns ({', '.join(text[:6])}); name the one the "
            "model reads with --text-column NAME"
        )
    ids_of = df[id_col].astype(str).to_numpy() if id_col else np.arange(len(df)).astype(str)
    y_of = df[label_col].to_numpy() if label_col else None
    left = (None if id_col else ids), (None if label_col else labels)
    if text == features and len(text) == 1 and len(df):  # raw texts, for the model's tokenizer
        from ncip.tool.texts import text_inputs

        column = text[0]
        if not df[column].map(lambda v: isinstance(v, str)).all():
            raise InputError(f"{path}: column {column!r} holds texts and other values (empty?)")
        note = f"texts in column {column!r}" + _label_id_detail(label_col, id_col) + left_out
        return text_inputs(df[column].tolist(), ids_of, y_of, str(path), note), *left
    if text:
        raise InputError(
            f"{path}: column {text[0]!r} is not numeric ({len(text)} such column(s)); encode it "
            "as the model was trained (codes, one-hot) or drop it; a table of raw texts has one "
            "text column beside its label and id columns, which are "
            f"{'/'.join(LABEL_COLUMNS)} and {'/'.join(ID_COLUMNS)}, or name them with --labels "
            "and --ids, or name the text column with --text-column"
        )
    if not features:
        raise InputError(f"{path} has no feature columns (columns: {', '.join(columns)})")
    x = df[features].to_numpy()
    if x.dtype == np.float64:
        x = x.astype(np.float32)
    detail = f"{len(features)} feature columns" + _label_id_detail(label_col, id_col)
    return Inputs(x, ids_of, y_of, str(path), detail=detail), *left


def _label_id_detail(label_col: str | None, id_col: str | None) -> str:
    if id_col == "Unnamed: 0":
        return _label_id_detail(label_col, None) + "; ids: the column pandas wrote as its index"
    labels = f", labels {label_col!r}" if label_col else ""
    return labels + (f", ids {id_col!r}" if id_col else "")


def _load_texts(path: Path) -> Inputs:
    from ncip.tool.texts import read_jsonl, read_text_lines, text_inputs

    if path.suffix.lower() == ".txt":
        texts, ids = read_text_lines(path)
        return text_inputs(texts, ids, None, str(path), "one text per line")
    texts, ids, y = read_jsonl(path)
    return text_inputs(texts, ids, y, str(path), "one JSON object per line")


def _tensor_array(t: Any, path: Path, key: str) -> np.ndarray:

    if not isinstance(t, torch.Tensor):
        raise InputError(f"{path}: {key!r} holds a {type(t).__name__}, not a tensor")
    if t.is_meta:
        raise InputError(f"{path}: {key!r} is a meta tensor, which holds no data; save the values")
    if t.layout != torch.strided:
        raise InputError(
            f"{path}: {key!r} is a {str(t.layout).removeprefix('torch.')} tensor; save it dense "
            "(t.to_dense())"
        )
    if t.is_quantized:
        raise InputError(f"{path}: {key!r} is a quantized tensor; save t.dequantize()")
    t = t.detach().cpu()
    if t.is_floating_point() and t.dtype not in (torch.float16, torch.float32, torch.float64):
        t = t.float()  # numpy has no bfloat16 or float8: exact in float32
    if t.ndim == 0:
        raise InputError(f"{path}: {key!r} holds one number, not a batch of inputs [N, ...]")
    return t.numpy()


def _load_torch(path: Path) -> Inputs:
    """Inputs saved with ``torch.save``: a tensor, or a dict with ``x`` (``y``, ``ids``
    optional). Only tensors and plain containers are unpickled (``weights_only=True``)."""
    import pickle
    import warnings

    try:
        with warnings.catch_warnings():  # e.g. sparse tensors' validation: said below instead
            warnings.simplefilter("ignore")
            obj = torch.load(path, map_location="cpu", weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, EOFError, OSError, ValueError, IndexError) as e:
        import re

        needs = re.search(r"GLOBAL ([\w.]+)", str(e))
        first = (
            f"it holds {needs.group(1)}, not only tensors and plain containers"
            if needs
            else reason(e)
        )
        raise InputError(
            f"{path} cannot be read as tensors with weights_only=True ({first}); save the "
            "inputs with torch.save(x) or torch.save({'x': x, 'y': y, 'ids': ids})"
        ) from None
    if isinstance(obj, torch.Tensor):
        x, y, ids = _tensor_array(obj, path, "the file"), None, None
    elif isinstance(obj, dict) and "x" in obj:
        x = _tensor_array(obj["x"], path, "x")
        y = _tensor_array(obj["y"], path, "y") if "y" in obj else None
        raw_ids = obj.get("ids")
        ids = None
        if raw_ids is not None:
            ids = (
                _tensor_array(raw_ids, path, "ids")
                if isinstance(raw_ids, torch.Tensor)
                else np.asarray(raw_ids)
            )
            if ids.dtype.kind not in "iuUS" or ids.ndim != 1:
                raise InputError(f"{path}: 'ids' must be one string or integer per input")
    else:
        what = (
            f"a dict without 'x' (keys: {', '.join(map(str, list(obj)[:6]))})"
            if isinstance(obj, dict)
            else f"a {type(obj).__name__}"
        )
        raise InputError(
            f"{path} holds {what}; save a tensor, or a dict with 'x' (and optional 'y', 'ids')"
        )
    if x.ndim == 0:
        raise InputError(f"{path} holds one number, not a batch of inputs [N, ...]")
    ids = np.arange(len(x)).astype(str) if ids is None else ids.astype(str)
    return Inputs(x, ids, y, str(path))


def _load_npz(path: Path) -> Inputs:
    import zipfile

    _check_npz_header(path)
    try:
        z = np.load(path, allow_pickle=False)
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as e:
        raise InputError(f"{path} is not a readable .npz file ({e})") from None
    with z:
        if "x" not in z.files:
            raise InputError(
                f"{path} has no array named 'x' (it has {', '.join(z.files) or 'none'}); "
                "save it with np.savez(path, x=inputs, ids=..., y=...)"
            )
        try:
            x = z["x"]
            ids = z["ids"].astype(str) if "ids" in z.files and x.ndim else None
            y = z["y"] if "y" in z.files else None
        except ValueError as e:
            raise InputError(
                f"{path} holds a pickled object array ({e}); save plain numeric and string arrays"
            ) from None
    if x.ndim == 0:
        raise InputError(f"{path}: 'x' holds one number, not a batch of inputs [N, ...]")
    return Inputs(x, np.arange(len(x)).astype(str) if ids is None else ids, y, str(path))


def _check_npz_header(path: Path) -> None:
    """A .npz is a zip archive; name what the file is instead when it is not one (numpy would
    otherwise try it as a pickle and speak of pickled data)."""
    try:
        with open(path, "rb") as f:
            head = f.read(6)
    except OSError as e:
        raise InputError(f"{path} cannot be read ({e.strerror})") from None
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        return
    if head.startswith(b"\x93NUMPY"):
        raise InputError(
            f"{path} is a single .npy array, not a .npz archive; rename it to .npy, or save "
            "np.savez(path, x=inputs, ids=..., y=...)"
        )
    raise InputError(
        f"{path} is not a .npz archive (no zip header); save the inputs with "
        "np.savez(path, x=inputs, ids=..., y=...)"
    )


def labels_by_name(inp: Inputs, names: list[str] | None, where: str) -> Inputs:
    """Labels given as class names (``sports``; ``M``/``B``) as class indices through
    ``names`` (class 0 first: ``--classes``, or a Hugging Face config's ``id2label``); integer
    labels, or numbers written as text, are left as they are. An unknown name is one line
    naming it and the known ones; names without a list to map them, one line saying how."""
    if inp.y is None:
        return inp
    y = np.asarray(inp.y)
    if y.ndim != 1 or y.dtype.kind in "iub":
        return inp
    try:
        y.astype(np.float64)
        return inp  # numbers (check_inputs checks they are whole)
    except (TypeError, ValueError):
        pass
    text = [str(v) for v in y.tolist()]
    if not names:
        shown = ", ".join(repr(v) for v in sorted(set(text))[:4])
        raise InputError(
            f"the labels of {inp.source} are names ({shown}...), and the model names no classes "
            "(no id2label in its config): give --classes NAME,NAME,... in class order (class "
            "0 first), or integer labels"
        )
    index = {n: i for i, n in enumerate(names)}
    for i, v in enumerate(text):
        if v not in index:
            known = ", ".join(names[:12]) + (" ..." if len(names) > 12 else "")
            raise InputError(
                f"label {v!r} of input {str(inp.ids[i])!r} is none of the model's classes "
                f"({where}: {known})"
            )
    inp.y = np.array([index[v] for v in text], dtype=np.int64)
    return inp


def model_class_names(model: Any) -> list[str] | None:
    """A Hugging Face config's ``id2label`` as a list (class 0 first), unless it holds only the
    generic ``LABEL_<i>`` names; None for other models."""
    id2label = getattr(getattr(model, "config", None), "id2label", None)
    if not isinstance(id2label, dict) or not id2label:
        return None
    try:
        names = [str(id2label[i]) for i in range(len(id2label))]
    except KeyError:
        return None
    if all(n == f"LABEL_{i}" for i, n in enumerate(names)):
        return None
    return names


def check_inputs(inp: Inputs, num_classes: int) -> None:
    """Ids unique and as many as inputs; labels integral and in range."""
    n = len(inp)
    if n == 0:
        raise InputError(f"{inp.source} holds no inputs")
    if np.ndim(inp.ids) != 1:
        raise InputError(
            f"{inp.source}: ids have shape {list(np.shape(inp.ids))}; give one id per input (1-D)"
        )
    if len(inp.ids) != n:
        raise InputError(f"{inp.source}: {len(inp.ids)} ids for {n} inputs; give one id per input")
    if len(set(inp.ids.tolist())) != n:
        seen, dup = set(), None
        for i in inp.ids.tolist():
            if i in seen:
                dup = i
                break
            seen.add(i)
        raise InputError(
            f"{inp.source}: the id {str(dup)!r} appears more than once; ids must be unique"
        )
    if inp.y is None:
        return
    y = np.asarray(inp.y)
    if y.ndim != 1 or len(y) != n:
        raise InputError(
            f"labels have shape {list(y.shape)} for {n} inputs; give one integer class per input"
        )
    if y.dtype.kind not in "iu":
        try:
            yi = y.astype(np.float64)
        except ValueError:
            raise InputError("labels must be integer class indices") from None
        if not np.all(np.isfinite(yi)) or not np.all(yi == np.round(yi)):
            raise InputError("labels must be integer class indices (found non-integers)")
        y = yi.astype(np.int64)
    bad = np.flatnonzero((y < 0) | (y >= num_classes))
    if len(bad):
        i = int(bad[0])
        raise InputError(
            f"label {int(y[i])} of input {str(inp.ids[i])!r} is outside the model's "
            f"{num_classes} classes (0..{num_classes - 1}); "
            f"{len(bad)} labels are out of range"
        )
    inp.y = y.astype(np.int64)
