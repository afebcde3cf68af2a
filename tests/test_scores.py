import numpy as np
import pytest

from ncip.core.scores import deepgini, entropy, margin, msp, ncip_score, pcs, softmax64, tvd, zscore


def test_tvd_by_hand():
    final = np.array([[1.0, 0.0], [0.5, 0.5]])
    other = np.array([[0.0, 1.0], [0.5, 0.5]])
    probs = np.stack([other, final])  # K = 2, reference = last
    # sample 0: |0-1|+|1-0| = 2 for the other checkpoint, 0 for the reference -> 2 / (2*2)
    assert tvd(probs).tolist() == [0.5, 0.0]
    assert tvd(probs, ref=0).tolist() == [0.5, 0.0]
    assert tvd(final[None]).tolist() == [0.0, 0.0]  # a single checkpoint moves nowhere


def test_margin_by_hand():
    p = np.array([[0.7, 0.2, 0.1], [0.4, 0.4, 0.2], [0.1, 0.3, 0.6]])
    assert margin(p) == pytest.approx([0.5, 0.0, 0.3])


def test_zscore_uses_population_std_and_handles_constants():
    assert zscore(np.array([1.0, 3.0])).tolist() == [-1.0, 1.0]
    assert zscore(np.full(4, 2.5)).tolist() == [0.0] * 4


def test_ncip_is_the_sum_of_standardised_parts():
    rng = np.random.default_rng(0)
    probs = softmax64(rng.normal(size=(4, 50, 3)) * 3)
    expected = zscore(tvd(probs)) + zscore(1 - margin(probs[-1]))
    assert ncip_score(probs) == pytest.approx(expected)


def test_ncip_ranks_an_unstable_low_margin_input_first():
    stable = [0.9, 0.1]
    probs = np.array(
        [
            [stable, [0.2, 0.8], [0.85, 0.15]],
            [stable, [0.55, 0.45], [0.9, 0.1]],
        ]
    )
    s = ncip_score(probs)
    assert np.argmax(s) == 1


def test_shape_errors_name_the_expected_shape():
    with pytest.raises(ValueError, match=r"\[K, N, C\]"):
        tvd(np.ones((3, 2)))
    with pytest.raises(ValueError, match=r"\[N, C\]"):
        margin(np.ones(3))


def _naive(logits):
    p = softmax64(logits)
    top2 = np.sort(p, axis=1)[:, -2:]
    return {
        "entropy": -(p * np.log(p)).sum(1),
        "deepgini": 1 - (p**2).sum(1),
        "msp": -p.max(1),
        "pcs": -(top2[:, 1] - top2[:, 0]),
    }


@pytest.mark.parametrize(
    "name,fn", [("entropy", entropy), ("deepgini", deepgini), ("msp", msp), ("pcs", pcs)]
)
def test_confidence_baselines_rank_like_their_textbook_formulas(name, fn):
    logits = np.random.default_rng(3).normal(size=(200, 10)) * 2
    ours, naive = fn(logits), _naive(logits)[name]
    assert np.array_equal(np.argsort(ours), np.argsort(naive))
    if name in ("entropy", "deepgini"):
        assert ours == pytest.approx(naive)


def test_baselines_by_hand():
    logits = np.log(np.array([[0.5, 0.25, 0.25], [1 / 3, 1 / 3, 1 / 3]]))
    assert deepgini(logits) == pytest.approx([1 - 0.375, 1 - 1 / 3])
    assert entropy(logits) == pytest.approx([1.5 * np.log(2), np.log(3)])
    assert msp(logits) == pytest.approx([np.log(2), np.log(3)])
    assert pcs(logits) == pytest.approx([1 - 0.25, 1.0])  # -(p1 - p2) + 1


def test_saturated_logits_do_not_collapse_into_ties():
    # float32 softmax gives 1 - max p == 0 for all of these; the float64/logit formulas do not
    logits = np.zeros((5, 3))
    logits[:, 0] = [30, 32, 34, 36, 38]
    p32 = np.exp(logits - logits.max(1, keepdims=True)).astype(np.float32)
    p32 /= p32.sum(1, keepdims=True)
    assert len(set((1 - p32.max(1)).tolist())) == 1  # all tied in float32
    for fn in (entropy, deepgini, msp, pcs):
        s = fn(logits)
        assert len(set(s.tolist())) == 5, fn.__name__
        assert np.all(np.diff(s) < 0), fn.__name__  # more confident = lower priority


def test_msp_keeps_saturated_outputs_apart():
    """-max log_softmax is exactly 0 for all three rows below; the rest mass is not."""
    from ncip.core.scores import msp

    z = np.array([[40.0, 0, 0], [41.0, 0, 0], [42.0, 0, 0], [1.0, 0, 0]])
    s = msp(z)
    assert len(set(s.tolist())) == 4
    assert list(np.argsort(-s)) == [3, 0, 1, 2]  # least confident first
    assert s[3] == pytest.approx(-np.log(np.exp(1) / (np.exp(1) + 2)))


def test_the_selection_control_draws_as_many_pool_checkpoints_as_algorithm_1():
    """TVD(random K)+Margin (issue 37 item 4): the final checkpoint and K - 1 others drawn from
    the candidate pool, seeded; its TVD is over exactly those checkpoints."""
    from ncip.core.collapse import plan
    from ncip.study.predict import ProbStack
    from ncip.study.scores.ncip import ablation_scores, needed_epochs, random_epochs

    rng = np.random.default_rng(0)
    sel = plan(rng.uniform(0.05, 0.2, 30), k=5, alpha=0.5, epochs=list(range(1, 31)))
    drawn = random_epochs(sel, 7)
    assert drawn == random_epochs(sel, 7) and drawn[-1] == sel.final_epoch == 30
    assert len(drawn) == len(sel.selected_epochs) == 5 and len(set(drawn)) == 5
    assert set(drawn) <= set(sel.pool_epochs) and min(sel.pool_epochs) == 16
    assert any(random_epochs(sel, s) != drawn for s in range(1, 6))
    epochs = needed_epochs(sel, 7)
    # the pool holds the checkpoints of Algorithm 1 and of the draw; the checkpoint scores read
    # the pool and the last K
    assert set(sel.pool_epochs) | set(sel.last_k_epochs) == set(epochs) >= set(drawn)
    probs = rng.dirichlet(np.ones(3), size=(len(epochs), 40))
    ids = np.array([f"s{i}" for i in range(40)])
    logits = np.log(probs).astype(np.float32)
    stack = ProbStack(np.array(epochs), probs, logits, ids, np.zeros(40, dtype=np.int64))
    got = ablation_scores(stack, sel, 7)["tvd+random+margin"]
    rows = [epochs.index(e) for e in drawn]
    want = zscore(tvd(probs[rows])) + zscore(1.0 - margin(probs[epochs.index(30)]))
    np.testing.assert_allclose(got, want)


def test_the_study_checkpoint_scores_read_the_last_k_or_the_pool():
    """score-ncip's checkpoint scores (issue 45): the ensemble scores over the last K, the
    trajectory scores over the candidate pool, each as ncip.core computes them."""
    from ncip.core.collapse import plan
    from ncip.core.dynamics import CHECKPOINT_SCORES, checkpoint_scores
    from ncip.study.predict import ProbStack
    from ncip.study.scores import list_methods, method_info
    from ncip.study.scores.ncip import needed_epochs, score_ncip_split

    rng = np.random.default_rng(1)
    sel = plan(rng.uniform(0.05, 0.2, 20), k=4, alpha=0.5, epochs=list(range(1, 21)))
    epochs = needed_epochs(sel, 3)
    probs = rng.dirichlet(np.ones(4) * 0.3, size=(len(epochs), 30))
    stack = ProbStack(
        np.array(epochs),
        probs,
        np.log(probs).astype(np.float32),
        np.arange(30).astype(str),
        np.zeros(30, dtype=np.int64),
    )
    got = score_ncip_split(stack, sel, 3)
    assert list_methods("checkpoint") == list(CHECKPOINT_SCORES)
    assert set(got) >= set(CHECKPOINT_SCORES) and "ncip" in got
    last = [epochs.index(e) for e in sel.last_k_epochs]
    pool = [epochs.index(e) for e in sel.pool_epochs]
    assert len(last) == 4 and len(pool) == 10
    for name, info in CHECKPOINT_SCORES.items():
        rows = last if info.reads == "ensemble" else pool
        np.testing.assert_array_equal(got[name], checkpoint_scores(probs[rows], [name])[name])
        assert method_info(name).family == "checkpoint"
        assert info.reference in method_info(name).summary


def test_no_selection_control_when_algorithm_1_keeps_the_whole_pool():
    """K not smaller than the pool: random K of the pool is the pool, so the control would
    compare a selection with itself (issue 45 item 5); it is left out."""
    from ncip.core.collapse import plan
    from ncip.study.predict import ProbStack
    from ncip.study.scores.ncip import needed_epochs, score_ncip_split, selection_chooses

    rng = np.random.default_rng(2)
    sel = plan(rng.uniform(0.05, 0.2, 20), k=30, alpha=0.9, epochs=list(range(1, 21)))
    assert not selection_chooses(sel) and sel.selected_epochs == sel.pool_epochs
    epochs = needed_epochs(sel, 0)
    probs = rng.dirichlet(np.ones(3), size=(len(epochs), 12))
    stack = ProbStack(
        np.array(epochs),
        probs,
        np.log(probs).astype(np.float32),
        np.arange(12).astype(str),
        np.zeros(12, dtype=np.int64),
    )
    got = score_ncip_split(stack, sel, 0)
    assert "tvd+random+margin" not in got and "tvd+margin" in got and "ncip" in got
    assert selection_chooses(plan(rng.uniform(0.05, 0.2, 20), k=5, alpha=0.9))
