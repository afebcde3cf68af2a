"""What a model's outputs are, decided once before ranking and printed (issue 39: never
silently wrong):

- **which tensor holds the class scores**: a plain tensor, ``.logits`` (Hugging Face), else
  among the tensors of a tuple, list or dict the one as wide as the head (``(features, logits)``
  or ``{"aux": ..., "out": ...}`` are ranked on the logits, not on whatever comes first); none
  as wide, or several that differ, is refused with the fix;
- **logits or probabilities** (a model ending in ``softmax`` or ``sigmoid``): by the values of
  the probe batch, with the rule :func:`ncip.tool.ranking.decide_kind` applies to predictions
  (every row in [0, 1] summing to 1, or one column in [0, 1]), or as ``outputs`` says
  (``--outputs logits|probs``). Outputs equal to the head layer's own output on that batch
  (caught by a forward hook) pass through no softmax or sigmoid: logits, whatever their range.
  Probabilities are not softmaxed again.

The chosen tensor is selected by a forward hook on the model (its state dict is untouched), so
every inference path of :class:`ncip.core.engine.Engine` sees it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ncip.core.errors import InputError
from ncip.tool.inputs import Inputs
from ncip.tool.modelsource import LoadedModel, ModelSourceError, find_head
from ncip.tool.preprocess import probe_output
from ncip.tool.ranking import decide_kind

OUTPUTS = ("auto", "logits", "probs")
PROBE = 64  # inputs run through the model to decide


@dataclass
class OutputPlan:
    element: int | str | None  # index or key in a tuple/list/dict; None: the output itself
    kind: str  # "logits" or "probs"
    width: int  # class scores per input (1: one binary logit or probability)
    notes: list[str]

    def describe(self) -> dict[str, Any]:
        return {"element": self.element, "kind": self.kind, "width": self.width}


def _tensors(out: Any) -> list[tuple[int | str, torch.Tensor]]:
    if isinstance(out, dict):
        items = list(out.items())
    elif isinstance(out, tuple | list):
        items = list(enumerate(out))
    else:
        return []
    return [(k, v) for k, v in items if isinstance(v, torch.Tensor) and v.ndim == 2]


def _shown(cands: list[tuple[int | str, torch.Tensor]]) -> str:
    return ", ".join(f"{k!r}: width {int(v.shape[1])}" for k, v in cands)


def choose_element(out: Any, head: str, rows: int) -> tuple[int | str | None, list[str]]:
    """Which element of the model's output holds the class scores, and a note when that is
    not simply the output itself (or its first element)."""
    if isinstance(out, torch.Tensor):
        return None, []
    if isinstance(getattr(out, "logits", None), torch.Tensor):
        return None, []
    cands = _tensors(out)
    if not cands:
        raise InputError(
            f"the model returned a {type(out).__name__} holding no [batch, classes] tensor; "
            "return the logits (a tensor, .logits, or a tuple or dict holding them)"
        )
    kind = "dict" if isinstance(out, dict) else type(out).__name__
    if len(cands) == 1:
        k, _ = cands[0]
        return k, [] if k in (0, "logits") else [f"the model returns a {kind}; ranked on {k!r}"]
    wide = [(k, v) for k, v in cands if int(v.shape[1]) == rows]
    if not wide:
        raise InputError(
            f"the model returns a {kind} of tensors ({_shown(cands)}) and none is as wide as "
            f"its head {head!r} ({rows} rows): name the classifier layer with --head"
        )
    if len(wide) > 1 and not all(torch.equal(wide[0][1], v) for _, v in wide[1:]):
        raise InputError(
            f"the model returns a {kind} with several tensors as wide as its head {head!r} "
            f"({_shown(wide)}); ncip cannot tell which holds the logits: wrap the model to "
            "return them alone, or first"
        )
    k = wide[0][0]
    return k, [
        f"the model returns a {kind} of {len(cands)} tensors ({_shown(cands)}): ranked on "
        f"{k!r}, the one as wide as its head {head!r}"
    ]


def select(out: Any, element: int | str | None) -> Any:
    return out if element is None else out[element]


def plan_outputs(
    out: Any,
    head: str,
    rows: int,
    given: str = "auto",
    source: str = "the model",
    head_out: torch.Tensor | None = None,
) -> OutputPlan:
    """Decide from the model's output on the probe batch (see the module docstring).
    ``head_out``, the head layer's own output on that batch: outputs equal to it pass through
    no softmax or sigmoid, so they are logits whatever their range (a one-logit model whose
    logits all fall in [0, 1] is not taken for probabilities)."""
    if given not in OUTPUTS:
        raise InputError(f"--outputs must be one of {', '.join(OUTPUTS)}, got {given!r}")
    element, notes = choose_element(out, head, rows)
    from ncip.core.models import logits_of

    z = logits_of(select(out, element)).detach().float().cpu().numpy()
    if z.ndim != 2 or z.shape[1] < 1:
        raise InputError(
            f"{source}'s output for a batch has shape {list(z.shape)}; ncip needs class "
            "scores [batch, C] (C = 1: one logit of a binary classifier)"
        )
    finite = z[np.isfinite(z).all(axis=1)]  # non-finite outputs: the checkpoint is named later
    if given == "auto" and _is_head_output(z, head_out):
        kind = "logits"
        if len(finite) and finite.min() >= 0 and finite.max() <= 1:
            notes.append(
                f"the model's outputs lie in [0, 1] but are its head {head!r}'s own, with no "
                "softmax or sigmoid after it: ranked as logits; pass --outputs probs if they "
                "are probabilities"
            )
        return OutputPlan(element, kind, int(z.shape[1]), notes)
    try:
        kind, why = decide_kind([finite], given) if len(finite) else ("logits", "")
    except InputError as e:
        raise InputError(f"{e}; or pass --outputs logits") from None
    if kind == "probs" and given == "auto":
        notes.append(
            f"the model's outputs look like {why} (a softmax or sigmoid at its end): ranked as "
            "probabilities; pass --outputs logits if they are logits"
        )
    if kind == "probs" and given == "probs" and (z.min() < 0 or z.max() > 1):
        raise InputError("--outputs probs, but the model's outputs lie outside [0, 1]")
    return OutputPlan(element, kind, int(z.shape[1]), notes)


def _is_head_output(z: np.ndarray, head_out: torch.Tensor | None) -> bool:
    if head_out is None:
        return False
    h = head_out.detach().float().cpu().numpy()
    return h.shape == z.shape and bool(np.array_equal(h, z, equal_nan=True))


def install(model: torch.nn.Module, plan: OutputPlan):
    """A forward hook returning the chosen element (None when the output is used as it is)."""
    if plan.element is None:
        return None
    return model.register_forward_hook(lambda _m, _i, out: select(out, plan.element))


def model_outputs(
    lm: LoadedModel, cs, pre, inp: Inputs, dev, head: str | None, outputs: str
) -> tuple[int, bool, OutputPlan]:
    """The model's class count (a one-logit model: 2, ranked as ``[1 - p, p]``) and what its
    outputs are (:func:`plan_outputs` on a probe batch, installed on the model), with the head
    found again when the recorded one has another row count."""
    seen: list = []  # the head's own output on the probe: outputs equal to it are logits
    hook = lm.model.get_submodule(lm.head).register_forward_hook(lambda _m, _i, o: seen.append(o))
    try:
        raw = probe_output(lm.model, pre, inp, dev, lm.meta, min(len(inp), PROBE))
    finally:
        hook.remove()
    head_out = seen[-1] if seen and isinstance(seen[-1], torch.Tensor) else None
    out_plan = plan_outputs(raw, lm.head, lm.num_classes, outputs, head_out=head_out)
    classes = out_plan.width
    if classes != lm.num_classes:
        if head:
            raise ModelSourceError(
                f"the model outputs {classes} classes but --head {head!r} has {lm.num_classes} rows"
            )
        lm.set_head(find_head(lm.model, classes), cs.final)
    install(lm.model, out_plan)
    binary = classes == 1  # one logit: p = sigmoid(z), or one probability
    return (2 if binary else classes), binary, out_plan
