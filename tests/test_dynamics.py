"""The checkpoint scores (ncip.core.dynamics): each against an independent float64 formula on
random stacks, on hand-made stacks whose answer is known, and streamed in batches (with a
checkpoint dropped half-way) against the stacked computation."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from scipy.stats import entropy as scipy_entropy

from ncip.core.dynamics import (
    CHECKPOINT_SCORES,
    CheckpointAccumulator,
    checkpoint_scores,
    column,
)
from ncip.core.errors import InputError


def _stack(k: int, n: int, c: int, seed: int = 0, sharp: float = 3.0) -> np.ndarray:
    z = np.random.default_rng(seed).normal(size=(k, n, c)) * sharp
    e = np.exp(z - z.max(axis=2, keepdims=True))
    return e / e.sum(axis=2, keepdims=True)


def _reference(p: np.ndarray) -> dict[str, np.ndarray]:
    """Each score written out input by input, with scipy's entropy and plain Python loops."""
    k, n, _ = p.shape
    out = {name: np.zeros(n) for name in CHECKPOINT_SCORES}
    for i in range(n):
        traj = p[:, i, :]
        preds = [int(np.argmax(traj[t])) for t in range(k)]
        mean = traj.mean(axis=0)
        out["ensemble-entropy"][i] = scipy_entropy(mean)
        out["mutual-information"][i] = scipy_entropy(mean) - np.mean(
            [scipy_entropy(traj[t]) for t in range(k)]
        )
        out["variation-ratio"][i] = 1 - Counter(preds).most_common(1)[0][1] / k
        changes = [t for t in range(1, k) if preds[t] != preds[t - 1]]
        out["flips"][i] = len(changes)
        out["settle-epoch"][i] = changes[-1] if changes else 0
        y = preds[-1]
        margins = [traj[t, y] - max(v for c, v in enumerate(traj[t]) if c != y) for t in range(k)]
        out["aum"][i] = -np.mean(margins)
        out["variability"][i] = np.std(traj[:, y])
    return out


@pytest.mark.parametrize("k,c", [(2, 2), (7, 3), (12, 10)])
def test_each_score_equals_an_independent_formula(k, c):
    p = _stack(k, 40, c, seed=k + c)
    got, want = checkpoint_scores(p), _reference(p)
    assert list(got) == list(CHECKPOINT_SCORES)
    for name in CHECKPOINT_SCORES:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-12, atol=1e-14, err_msg=name)


def test_one_checkpoint_is_the_final_model_alone():
    p = _stack(1, 30, 4)
    s = checkpoint_scores(p)
    np.testing.assert_allclose(s["ensemble-entropy"], scipy_entropy(p[0].T))
    for name in ("mutual-information", "variation-ratio", "flips", "settle-epoch", "variability"):
        assert np.all(s[name] == 0), name
    top2 = np.sort(p[0], axis=1)[:, -2:]
    np.testing.assert_allclose(s["aum"], -(top2[:, 1] - top2[:, 0]))


def test_identical_checkpoints_carry_no_disagreement():
    p = np.repeat(_stack(1, 25, 5, seed=3), 6, axis=0)
    s = checkpoint_scores(p)
    np.testing.assert_allclose(s["mutual-information"], 0, atol=1e-15)
    assert np.all(s["variation-ratio"] == 0) and np.all(s["flips"] == 0)
    assert np.all(s["settle-epoch"] == 0)
    np.testing.assert_allclose(s["variability"], 0, atol=1e-15)
    np.testing.assert_allclose(s["ensemble-entropy"], scipy_entropy(p[0].T))


def test_a_flip_every_checkpoint():
    # input 0 alternates between classes 0 and 1 at every one of 5 checkpoints (final: class 0);
    # input 1 is class 2 throughout; input 2 changes once, at the last checkpoint
    a, b, c = [0.8, 0.1, 0.1], [0.1, 0.8, 0.1], [0.1, 0.1, 0.8]
    p = np.array(
        [
            [a, c, b],
            [b, c, b],
            [a, c, b],
            [b, c, b],
            [a, c, a],
        ]
    )
    s = checkpoint_scores(p)
    assert s["flips"].tolist() == [4, 0, 1]
    assert s["settle-epoch"].tolist() == [4, 0, 4]
    np.testing.assert_allclose(s["variation-ratio"], [2 / 5, 0, 1 / 5])
    # the final class's probability is 0.8, 0.1, 0.8, 0.1, 0.8 for input 0: sd 0.3429...
    np.testing.assert_allclose(s["variability"][0], np.std([0.8, 0.1, 0.8, 0.1, 0.8]))
    # margins of class 0 for input 0: +0.7, -0.7, +0.7, -0.7, +0.7 -> mean 0.14, negated
    np.testing.assert_allclose(s["aum"], [-0.14, -0.7, 0.7 * 4 / 5 - 0.7 / 5])
    # the more the checkpoints disagree, the more mutual information
    assert s["mutual-information"][0] > s["mutual-information"][2] > s["mutual-information"][1]


def test_streamed_in_batches_with_a_dropped_checkpoint_equals_the_stack():
    p = _stack(6, 50, 7, seed=9)
    acc = CheckpointAccumulator(p[-1])
    for k in range(5):
        for start in range(0, 50, 16):
            acc.add(start, p[k, start : start + 16])
        acc.checkpoint_done()
        if k == 2:  # a bad checkpoint, half-way through, then dropped
            acc.add(0, np.full((16, 7), 1 / 7))
            acc.discard()
    got, want = acc.scores(), checkpoint_scores(p)
    for name in CHECKPOINT_SCORES:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)
    assert acc.scores() is got  # computed once
    with pytest.raises(InputError, match="already computed"):
        acc.checkpoint_done()


def test_saturated_probabilities_stay_finite():
    p = np.zeros((3, 2, 4))
    p[:, :, 0] = 1.0  # one-hot rows: 0 log 0 counts as 0
    s = checkpoint_scores(p)
    for name, v in s.items():
        assert np.all(np.isfinite(v)), name
    assert np.all(s["ensemble-entropy"] == 0) and np.all(s["aum"] == -1)


def test_bad_shapes_and_names_are_refused():
    with pytest.raises(InputError, match=r"\[K, N, C\]"):
        checkpoint_scores(np.ones((4, 3)))
    with pytest.raises(InputError, match="unknown checkpoint scores"):
        checkpoint_scores(_stack(2, 3, 2), ["entropy"])
    with pytest.raises(InputError, match="C >= 2"):
        CheckpointAccumulator(np.ones((3, 1)))
    assert column("ensemble-entropy") == "ensemble_entropy"


def test_docs_name_every_checkpoint_score_with_its_reference():
    from helpers import ROOT

    page = (ROOT / "docs" / "methods.md").read_text()
    for name, info in CHECKPOINT_SCORES.items():
        assert f"`{name}` (`{column(name)}`)" in page, name
        assert info.reference in page, name


def test_ncip_methods_lists_the_checkpoint_scores_with_their_references():
    from typer.testing import CliRunner

    from ncip.cli import app

    r = CliRunner().invoke(app, ["methods"])
    assert r.exit_code == 0, r.output
    listed = r.output[r.output.index("checkpoint scores (score-ncip") :]
    for name, info in CHECKPOINT_SCORES.items():
        assert f"  {name} " in listed and info.reference in listed, name
    assert listed.index("ensemble-entropy") < listed.index("variability")  # registered order
