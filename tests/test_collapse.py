import json
import warnings

import numpy as np
import pytest

from ncip.core.collapse import (
    Selection,
    candidate_pool,
    plan,
    select_checkpoints,
    sigma_cos,
    sigma_cos_series,
)
from ncip.core.errors import InputError


def test_sigma_cos_of_a_simplex_etf_is_zero():
    C = 5
    M = np.eye(C) - 1.0 / C  # centred one-hot vectors: a simplex equiangular tight frame
    assert sigma_cos(M) == pytest.approx(0.0, abs=1e-12)


def test_sigma_cos_by_hand():
    W = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    cos = np.array([0.0, 1 / np.sqrt(2), 1 / np.sqrt(2)])  # pairs (0,1), (0,2), (1,2)
    assert sigma_cos(W) == pytest.approx(np.std(cos))
    assert sigma_cos(7.0 * W) == pytest.approx(sigma_cos(W))  # scale-free
    assert sigma_cos(W[:2]) == 0.0  # two classes: one pair


def test_sigma_cos_rejects_bad_input():
    with pytest.raises(ValueError, match="zeros"):
        sigma_cos(np.array([[1.0, 0.0], [0.0, 0.0], [1.0, 1.0]]))
    with pytest.raises(ValueError, match=r"\[C, d\]"):
        sigma_cos(np.ones(3))


def test_candidate_pool_is_the_last_alpha_share():
    assert candidate_pool(100, 0.9).tolist() == list(range(10, 100))  # epochs 11-100 (paper)
    assert candidate_pool(5, 0.5).tolist() == [2, 3, 4]  # round half up: 2.5 -> 3
    assert candidate_pool(5, 0.01).tolist() == [4]  # at least the final checkpoint
    for bad in (0.0, -0.1, 1.5):
        with pytest.raises(ValueError, match="alpha"):
            candidate_pool(10, bad)


def test_algorithm_1_by_hand():
    # exact binary fractions, so the distances below are exact
    c = [0.5, 0.125, 0.375, 0.25, 0.4375]
    # keep the last (0.4375); farthest: 0.125 (0.3125); then min distances are
    # 0.5 -> 0.0625, 0.375 -> 0.0625, 0.25 -> 0.125: add 0.25 (index 3)
    assert select_checkpoints(c, 3).tolist() == [1, 3, 4]
    # next: indices 0 and 2 tie at 0.0625; the earliest candidate wins
    assert select_checkpoints(c, 4).tolist() == [0, 1, 3, 4]
    assert select_checkpoints(c, 1).tolist() == [4]


def test_algorithm_1_ties_go_to_the_earliest_candidate():
    assert select_checkpoints([1.0, 1.0, 1.0, 1.0], 2).tolist() == [0, 3]
    assert select_checkpoints([0.0, 2.0, 1.0], 2).tolist() == [0, 2]  # 0 and 2 both 1 away


def test_k_at_least_the_pool_selects_all_with_a_warning():
    with pytest.warns(UserWarning, match="whole pool"):
        assert select_checkpoints([0.3, 0.2, 0.1], 5).tolist() == [0, 1, 2]
    with pytest.warns(UserWarning):
        select_checkpoints([0.3, 0.2, 0.1], 3)


@pytest.mark.parametrize("k", [0, -3, 2.5, True])
def test_bad_k_is_rejected(k):
    with pytest.raises(ValueError, match="k must be a positive integer"):
        select_checkpoints([0.1, 0.2], k)


def test_plan_records_pool_selected_and_last_k():
    epochs = np.arange(1, 11)
    scores = np.linspace(0.2, 0.1, 10)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sel = plan(scores, 3, 0.5, epochs=epochs)
    record = sel.to_record()
    assert record["pool_epochs"] == [6, 7, 8, 9, 10]
    assert record["selected_epochs"][-1] == 10 and len(record["selected_epochs"]) == 3
    assert set(record["selected_epochs"]) <= set(record["pool_epochs"])
    assert record["selected_epochs"] == [6, 8, 10]
    assert record["last_k_epochs"] == [8, 9, 10]
    assert record["final_epoch"] == 10
    assert sel.note is None


def test_a_selection_record_reads_back_as_the_same_selection():
    sel = plan([0.3, 0.1, 0.25, 0.2, 0.05, 0.15], 3, 0.9, epochs=[2, 4, 6, 8, 10, 12])
    record = json.loads(json.dumps(sel.to_record()))  # as a stage writes and reads it
    assert Selection.from_record(record) == sel
    del record["pool_epochs"]
    with pytest.raises(InputError, match="not a selection record"):
        Selection.from_record(record)


def test_k_at_least_the_pool_keeps_it_and_says_how_to_select():
    sel = plan([0.3, 0.2, 0.1], 5, 1.0)
    assert sel.chosen == (0, 1, 2)
    assert "keeps the whole pool" in sel.note


def test_one_logit_heads_use_the_last_k_of_the_pool():
    sigma = sigma_cos_series([np.ones((1, 4))] * 6)
    assert all(np.isnan(sigma))
    sel = plan(sigma, 2, 1.0, binary=True)
    assert sel.chosen == (4, 5) and "one-logit" in sel.note


def test_sigma_cos_series_names_the_bad_checkpoint():
    good = np.eye(3)
    with pytest.raises(InputError, match="run-0/epoch-002: the head holds NaN"):
        sigma_cos_series([good, np.full((3, 3), np.nan)], ["run-0/epoch-001", "run-0/epoch-002"])
    assert sigma_cos_series([good]) == [sigma_cos(good)]


@pytest.mark.parametrize("shape", [(300, 8), (1000, 64), (5000, 3)])
def test_sigma_cos_through_the_gram_matrix_equals_the_direct_value(shape):
    """The Gram route (a language model's vocabulary-sized head) against all V(V-1)/2 pairs."""
    from ncip.core.collapse import _sigma_cos_gram

    rng = np.random.default_rng(shape[0])
    W = rng.standard_normal(shape) + 0.3  # a common offset: mean cosine far from 0
    norms = np.linalg.norm(W, axis=1)
    U = W / norms[:, None]
    direct = np.std((U @ U.T)[np.triu_indices(shape[0], k=1)])
    assert _sigma_cos_gram(W, norms) == pytest.approx(direct, rel=1e-9, abs=1e-12)


def test_sigma_cos_takes_the_gram_route_above_its_threshold(monkeypatch):
    import ncip.core.collapse as collapse

    W = np.random.default_rng(0).standard_normal((50, 4))
    direct = sigma_cos(W)
    monkeypatch.setattr(collapse, "GRAM_ABOVE", 10)
    called = []
    real = collapse._sigma_cos_gram
    monkeypatch.setattr(collapse, "_sigma_cos_gram", lambda *a: called.append(1) or real(*a))
    assert sigma_cos(W) == pytest.approx(direct, rel=1e-9) and called
