"""Where the model comes from: a factory, torchvision, ncip's registry or the checkpoint itself.

``--model`` (or ``model=`` in :func:`ncip.rank`) takes

- ``package.module:function`` or ``path/to/file.py:function``: an importable factory (a function
  or an ``nn.Module`` class); ``num_classes`` is passed when it takes that argument; arguments
  it needs are written after it as Python literals, ``mynet:Net(hidden=256, depth=3)``;
- ``torchvision:NAME``: ``torchvision.models.get_model(NAME, weights=None, num_classes=C)``;
- the name of one of ncip's registered models (``ncip models``);
- a Python callable (library use);
- nothing, for ncip's own checkpoints (their metadata names the architecture) and Hugging Face
  checkpoint folders (their ``config.json`` does; built locally, nothing is downloaded).

The number of classes, when the factory needs it, is ``num_classes`` if given, else the first
output size of a 2-D weight in the final checkpoint (from the end) for which the model's tensors
match the file. The head is the last ``nn.Linear`` whose output size is the number of classes,
or the module named with ``head``.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn as nn

from ncip.core.checkpoints import CheckpointMeta
from ncip.core.factory import (
    Factory,
    ModelSourceError,
    build_external,
    callable_factory,
    hf_meta_factory,
)
from ncip.tool.formats import Checkpoint, CheckpointError, CheckpointSet
from ncip.tool.hfmodels import hf_factory, hf_pretrained
from ncip.tool.messages import reason
from ncip.tool.tensors import find_prefix, read_tensors, tensor_keys, tensor_shapes
from ncip.tool.userspec import import_user, split_call

MAX_CLASS_GUESSES = 8


@dataclass(frozen=True)
class HeadRef:
    """Where the head is in the files, when that is all a command needs (σ_cos: ncip prune)."""

    head_key: str
    num_classes: int


def recorded_head(cs: CheckpointSet) -> HeadRef | None:
    """The head an ncip checkpoint folder records (``head_key`` in every file's metadata), read
    without building the model; None where the files do not record it."""
    keys = {c.meta.head_key for c in cs} if all(c.meta is not None for c in cs) else {None}
    if None in keys or len(keys) != 1:
        return None
    key = keys.pop()
    shapes = tensor_shapes(cs.final)
    if key not in shapes or len(shapes[key]) < 2:
        raise CheckpointError(
            f"{cs.final.path} records its head as {key!r} but holds no such matrix"
        )
    return HeadRef(key, int(shapes[key][0]))


@dataclass
class LoadedModel:
    """A model with the final checkpoint's weights, and how the files map onto it."""

    model: nn.Module
    description: str
    prefix: str  # stripped from the file's keys
    head: str  # the head module's name in the model
    head_key: str  # the head weight's key in the files
    num_classes: int
    keys: list[str]  # the model's state-dict keys (what is read from each file)
    meta: CheckpointMeta | None  # ncip metadata of the final checkpoint, if any
    hf: bool = False  # load with transformers' from_pretrained (it renames weights on load)

    def load(self, ck: Checkpoint) -> nn.Module:
        """Load a checkpoint's weights into the model (in place) and return it."""
        if self.hf:
            src = hf_pretrained(type(self.model), ck)
            self.model.load_state_dict(src.state_dict())
        else:
            load_weights_into(self.model, ck, self.prefix, self.keys)
        return self.model

    def set_head(self, name: str, final: Checkpoint) -> None:
        """Use module ``name`` as the head; find its weight's key in the files (by name, or, where
        a library renames weights when saving, by value in the final checkpoint)."""
        self.head = name
        key = f"{name}.weight"
        weight = self.model.state_dict()[key].detach().cpu()
        self.num_classes = int(weight.shape[0])
        shapes = tensor_shapes(final)
        if self.prefix + key in shapes:
            self.head_key = self.prefix + key
            return
        for k, shape in shapes.items():
            if shape == tuple(weight.shape) and torch.equal(
                read_tensors(final, [k])[k].to(weight.dtype), weight
            ):
                self.head_key = k
                return
        raise ModelSourceError(
            f"cannot find the head {key!r} among {final.path}'s tensors; "
            "name the head layer with --head"
        )


def _runs_no_code(recorded: str) -> bool:
    """A recorded factory that names no code to import: an ncip model or a torchvision builder."""
    from ncip.core.models import list_models

    return recorded in list_models() or recorded.startswith("torchvision:")


def _recorded_factory(meta: CheckpointMeta, cs: CheckpointSet, trust: bool) -> Factory:
    """The factory a checkpoint's metadata names. Checkpoint files are untrusted data, like a
    pickle: a module or file named inside them is imported only when the user says so."""
    recorded = str(meta.factory)
    if _runs_no_code(recorded):
        return resolve_factory(recorded, cs)
    if not trust:
        raise ModelSourceError(
            f"the checkpoints name their model factory {recorded!r}; ncip runs no code named "
            f"inside checkpoint files: if you trust it, pass --model {shlex.quote(recorded)} (or "
            "--trust-recorded-model)"
        )
    if meta.arch == "external":
        return Factory(lambda _c: build_external(meta), False, f"{recorded} (imported)")
    return _user_factory(recorded, f"{recorded} (recorded in the checkpoints)")


def resolve_factory(
    spec: str | Callable | None,
    cs: CheckpointSet,
    trust_recorded: bool = False,
    arguments: bool = True,
) -> Factory:
    """The model factory named by ``spec`` (see the module docstring). Without ``spec``, a
    factory recorded in the checkpoints is used only if it runs no code (an ncip model, a
    torchvision builder, a Hugging Face architecture with its config), or with
    ``trust_recorded``."""
    from ncip.core.models import list_models

    if callable(spec):
        return callable_factory(spec, getattr(spec, "__qualname__", repr(spec)))
    final = cs.final
    if spec is None:
        meta = final.meta or CheckpointMeta()
        if meta.arch in list_models():
            return _ncip_factory(meta)
        if meta.hf_architecture:
            return hf_meta_factory(meta)
        if meta.factory:
            return _recorded_factory(meta, cs, trust_recorded)
        if final.fmt == "hf" and (final.path / "config.json").is_file():
            return hf_factory(final.path / "config.json")
        raise ModelSourceError(
            f"the checkpoints ({final.fmt} format) do not say which model they hold; name it "
            "with --model package.module:function, torchvision:NAME or one of ncip's models "
            f"({', '.join(list_models())})"
        )
    if spec.startswith("torchvision:"):
        return _torchvision_factory(spec.split(":", 1)[1])
    if spec in list_models():
        return _registry_factory(spec, cs)
    if not arguments:
        return callable_factory(import_user(spec), f"model {spec}")
    return _user_factory(spec, f"--model {spec}", final)


def _user_factory(spec: str, description: str, final: Checkpoint | None = None) -> Factory:
    """A factory from the user's module or file, with the literal arguments the spec gives;
    without any, the arguments a PyTorch Lightning checkpoint records (``hyper_parameters``,
    which ``LightningModule.load_from_checkpoint`` passes too) that the factory takes."""
    import functools

    name, args, kwargs = split_call(spec)
    fn = import_user(name)
    config_class = getattr(fn, "config_class", None)
    if not args and not kwargs and final is not None and final.fmt == "hf" and config_class:
        # the user's own PreTrainedModel: its config is the config.json beside the weights
        try:
            config = config_class.from_pretrained(str(final.path), local_files_only=True)
        except Exception as e:  # noqa: BLE001  (transformers raises many types)
            raise ModelSourceError(
                f"{description}: {final.path}/config.json cannot be read by "
                f"{config_class.__name__} ({type(e).__name__}: {str(e)[:120]})"
            ) from None
        return Factory(lambda _c: fn(config), False, f"{description} with its config.json")
    if not args and not kwargs and final is not None:
        recorded = _recorded_hyperparameters(final, fn)
        kwargs = {k: v for k, v in recorded.items() if _plain_value(v)}
        if kwargs:
            shown = ", ".join(f"{k}={v!r}" for k, v in kwargs.items())
            description += f" with the checkpoint's hyper_parameters ({shown})"
        held = [k for k in recorded if k not in kwargs]
        if held:
            description += (
                f"; not passed, as they are not plain numbers or names: "
                f"{', '.join(f'{k}={recorded[k]!r:.60}' for k in held)} (give them in --model "
                f"{name}(...) to use them)"
            )
    if args or kwargs:
        fn = functools.wraps(fn)(functools.partial(fn, *args, **kwargs))
    return callable_factory(fn, description)


_FILE_LIKE = re.compile(r"[/\\~]|\.(pt|pth|ckpt|bin|safetensors|pkl|pickle|py|json|ya?ml|npz?)$")


def _plain_value(v: Any) -> bool:
    """A hyper-parameter value passed to the user's class unasked: numbers, booleans, None,
    strings that name no file (no path separator, no file suffix), and lists of those. A path
    shipped in a checkpoint folder is data, and would reach the user's code unseen."""
    if v is None or isinstance(v, bool | int | float):
        return True
    if isinstance(v, str):
        return len(v) <= 200 and not _FILE_LIKE.search(v)
    if isinstance(v, list | tuple):
        return len(v) <= 64 and all(_plain_value(x) and not isinstance(x, list | tuple) for x in v)
    return False


def _recorded_hyperparameters(final: Checkpoint, fn: Callable) -> dict[str, Any]:
    """The ``hyper_parameters`` of a Lightning checkpoint that ``fn`` takes by name."""
    import inspect

    from ncip.tool.unpickle import torch_load

    if final.fmt != "container" or final.container_key != "state_dict":
        return {}
    hp = torch_load(final.path).get("hyper_parameters")
    if not isinstance(hp, dict):
        return {}
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return {}
    named = {
        n
        for n, p in params.items()
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and n != "self"
    }
    return {k: v for k, v in hp.items() if k in named}


def _ncip_factory(meta: CheckpointMeta) -> Factory:
    from ncip.core.checkpoints import build_model

    return Factory(lambda _c: build_model(meta), False, f"ncip model {meta.arch}")


def _registry_factory(name: str, cs: CheckpointSet) -> Factory:
    from ncip.core.models import create_model, model_kind

    keys = tensor_keys(cs.final)
    extra: dict[str, Any] = {}
    if model_kind(name) == "text":
        emb = [k for k in keys if k.endswith("embed.weight")]
        if emb:
            extra["vocab_size"] = int(read_tensors(cs.final, emb[:1])[emb[0]].shape[0])
    else:
        norm = [k for k in keys if k.endswith("normalize.mean")]
        if norm:
            extra["in_channels"] = int(read_tensors(cs.final, norm[:1])[norm[0]].shape[1])

    def build(num_classes: int | None) -> nn.Module:
        return create_model(name, num_classes or 10, **extra)

    return Factory(build, True, f"ncip model {name}")


def _torchvision_factory(name: str) -> Factory:
    import torchvision

    available = torchvision.models.list_models()
    if name not in available:
        raise ModelSourceError(
            f"--model torchvision:{name}: torchvision has no model {name!r}; "
            f"e.g. {', '.join(sorted(available)[:8])}, ..."
        )

    def build(num_classes: int | None) -> nn.Module:
        kw = {"num_classes": num_classes} if num_classes is not None else {}
        return torchvision.models.get_model(name, weights=None, **kw)

    return Factory(build, True, f"torchvision {name} (no weights)")


def find_head(model: nn.Module, num_classes: int | None = None, given: str | None = None) -> str:
    """The head module's name: ``given``, else the last nn.Linear with ``num_classes`` outputs."""
    state = model.state_dict()
    if given:
        name = given[: -len(".weight")] if given.endswith(".weight") else given
        if f"{name}.weight" not in state or state[f"{name}.weight"].ndim < 2:
            raise ModelSourceError(
                f"--head {given!r}: the model has no layer {name!r} with a "
                f"weight matrix; e.g. {', '.join(_linear_names(model)[-3:])}"
            )
        return name
    linears = [(n, m) for n, m in model.named_modules() if isinstance(m, nn.Linear)]
    if num_classes is not None:
        linears = [(n, m) for n, m in linears if m.out_features == num_classes]
    if not linears:
        what = f"with {num_classes} outputs " if num_classes is not None else ""
        raise ModelSourceError(
            f"the model has no nn.Linear {what}to serve as the classifier "
            "head; name its layer with --head"
        )
    return linears[-1][0]


def _linear_names(model: nn.Module) -> list[str]:
    return [n for n, m in model.named_modules() if isinstance(m, nn.Linear)] or ["(none)"]


def load_weights_into(model: nn.Module, ck: Checkpoint, prefix: str, keys: list[str]) -> None:
    """Load a checkpoint's tensors for ``keys`` (model names) into ``model``, shapes checked."""
    tensors = read_tensors(ck, [prefix + k for k in keys])
    own = model.state_dict()
    state = {}
    for k in keys:
        t = tensors[prefix + k]
        if tuple(t.shape) != tuple(own[k].shape):
            raise CheckpointError(
                f"{ck.path}: tensor {prefix + k!r} has shape {list(t.shape)} "
                f"but the model's {k!r} has {list(own[k].shape)}; is this "
                "checkpoint from the same model?"
            )
        state[k] = t
    model.load_state_dict(state, strict=False)


def _mismatches(model: nn.Module, file_shapes: dict[str, tuple], prefix: str) -> list[str]:
    """The model's tensors the file lacks or holds in another shape, each said in words."""
    out = []
    for k, v in model.state_dict().items():
        have = file_shapes.get(prefix + k)
        if have is None:
            out.append(f"the file has no {prefix + k!r}")
        elif have != tuple(v.shape):
            out.append(f"the model's {k!r} is {list(v.shape)}, the file's {list(have)}")
    return out


def load_model(
    spec: str | Callable | None,
    cs: CheckpointSet,
    num_classes: int | None = None,
    prefix: str | None = None,
    head: str | None = None,
    device: torch.device | str = "cpu",
    trust_recorded: bool = False,
    arguments: bool = True,
) -> LoadedModel:
    """Build the model, match the final checkpoint's keys to it and load those weights.
    ``arguments=False``: the factory is called by name alone, as the study's stages will call
    the factory an imported subject records (no literal arguments, no hyper_parameters)."""
    factory = resolve_factory(spec, cs, trust_recorded, arguments)
    final = cs.final
    file_shapes = tensor_shapes(final)
    model = None
    if factory.takes_num_classes and num_classes is None:
        model, num_classes = _guess_classes(factory, file_shapes, prefix)
    if model is None:
        try:
            model = _build(factory, num_classes)
        except ModelSourceError:
            raise
        except Exception as e:  # noqa: BLE001  (user code: report it in one line)
            raise ModelSourceError(
                f"{factory.description} failed to build the model: {type(e).__name__}: {e}"
                + _arguments_hint(factory, e)
            ) from None
    keys = list(model.state_dict().keys())
    hf = final.fmt == "hf" and hasattr(model, "from_pretrained") and prefix is None
    pre = "" if hf else find_prefix(file_shapes, keys, prefix)
    model.eval()
    head_name = find_head(model, num_classes if factory.takes_num_classes else None, head)
    loaded = LoadedModel(model, factory.description, pre, head_name, "", 0, keys, final.meta, hf)
    loaded.load(final)
    loaded.set_head(head_name, final)
    model.to(device)
    return loaded


def _arguments_hint(factory: Factory, error: Exception | str) -> str:
    """How to give the arguments a factory said it misses (a TypeError naming them)."""
    import re

    msg = str(error)
    spec = factory.description.removeprefix("--model ")
    if "TypeError" not in f"{type(error).__name__} {msg}" or "required" not in msg:
        return ""
    if "(" in spec or not factory.description.startswith("--model "):
        return ""
    names = [n for n in re.findall(r"'(\w+)'", msg.split("required", 1)[1]) if n != "num_classes"]
    call = ", ".join(f"{n}=..." for n in names or ["hidden"])
    passed = " (ncip passes num_classes)" if factory.takes_num_classes else ""
    return f"; give its arguments as Python literals after it: --model '{spec}({call})'{passed}"


def _build(factory: Factory, num_classes: int | None) -> nn.Module:
    """Call the factory; one that exits (``sys.exit``, ``exit()``) is an error, not the end of
    ncip with exit code 0 and nothing written."""
    try:
        return factory.build(num_classes)
    except SystemExit as e:
        raise ModelSourceError(
            f"{factory.description} called sys.exit({e.code!r}) while building the model; "
            "nothing was ranked: it must return the model"
        ) from None


def _guess_classes(factory: Factory, file_shapes: dict[str, tuple], prefix: str | None):
    """(model, num_classes) for a factory that needs the class count, inferred from the file."""
    sizes: list[int] = []
    for k in reversed(list(file_shapes)):
        s = file_shapes[k]
        if k.endswith("weight") and len(s) == 2 and s[0] >= 1 and s[0] not in sizes:
            sizes.append(int(s[0]))
    errors: list[str] = []
    closest: tuple[int, int, str] | None = None  # (mismatches, classes, the first in words)
    for c in sizes[:MAX_CLASS_GUESSES]:
        try:
            model = _build(factory, c)
        except Exception as e:  # noqa: BLE001  (a wrong guess may not even build)
            first = reason(e, empty="")
            errors.append(f"{type(e).__name__}" + (f": {first}" if first else ""))
            continue
        keys = list(model.state_dict().keys())
        try:
            pre = find_prefix(file_shapes, keys, prefix)
        except CheckpointError:
            continue
        bad = _mismatches(model, file_shapes, pre)
        if not bad:
            return model, c
        if closest is None or len(bad) < closest[0]:
            closest = (len(bad), c, bad[0])
    if errors and len(errors) == len(sizes[:MAX_CLASS_GUESSES]):
        raise ModelSourceError(
            f"{factory.description} failed to build the model for every class count tried "
            f"({', '.join(map(str, sizes[:MAX_CLASS_GUESSES]))}): {errors[0]}"
            + _arguments_hint(factory, errors[0])
        )
    tried = ", ".join(map(str, sizes[:MAX_CLASS_GUESSES])) or "none"
    if closest is not None:
        # the class count is not what differs when the closest guess differs elsewhere (another
        # vocabulary, width or input size): name that tensor, not the class count
        raise ModelSourceError(
            f"{factory.description} does not match the final checkpoint: built with "
            f"{closest[1]} classes (the closest of {tried}), {closest[2]}"
            + (f" ({closest[0] - 1} more differ)" if closest[0] > 1 else "")
            + "; build the model the checkpoint was trained with (its vocabulary, widths and "
            "input size: give the factory's arguments after it, --model 'file.py:Net(...)'; "
            "its class count: --num-classes)"
        )
    raise ModelSourceError(
        f"{factory.description} does not match the final checkpoint for any class count the "
        f"file suggests ({tried}); check --model, or give --num-classes (and --prefix if the "
        "keys carry one)"
    )
