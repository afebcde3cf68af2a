import numpy as np
import pytest

from ncip.core.metrics import (
    apfd,
    evaluate_order,
    expected_random_rauc,
    fault_types,
    order_from_scores,
    rauc,
    rauc_prefix,
)


def test_rauc_worked_example_from_the_spec():
    # docs/baselines.md §3.1: N = 10, F = 4, top-5 flags 1,0,0,0,0 -> (G) = 5/14, (P) = 1.0
    flags = np.array([1, 0, 0, 0, 0, 1, 1, 0, 1, 0])
    assert rauc(flags, 5) == pytest.approx(5 / 14)
    assert rauc_prefix(flags, 5) == pytest.approx(1.0)


def test_rauc_by_hand():
    flags = np.array([0, 1, 1, 0])  # A = 0,1,2,2 -> 5; ideal min(i,2) = 1,2,2,2 -> 7
    assert rauc(flags) == pytest.approx(5 / 7)
    assert rauc(flags, 2) == pytest.approx(1 / 3)  # A = 0,1; ideal 1,2
    assert rauc(flags, 99) == rauc(flags)  # budgets beyond N are clipped


def test_rauc_all_is_the_papers_eq_11():
    rng = np.random.default_rng(1)
    flags = rng.random(500) < 0.2
    N, F = len(flags), flags.sum()
    eq11 = np.cumsum(flags).sum() / (N * F + (F - F**2) / 2)
    assert rauc(flags) == pytest.approx(eq11)


def test_ideal_order_gives_one_and_worst_is_lowest():
    flags = np.array([1] * 7 + [0] * 13)
    for n in (1, 5, 7, 10, None):
        assert rauc(flags, n) == pytest.approx(1.0)
    assert rauc(flags[::-1]) < rauc(np.random.default_rng(0).permutation(flags))


def test_no_faults_is_nan():
    assert np.isnan(rauc(np.zeros(5, bool)))
    assert np.isnan(apfd(np.zeros(5, bool)))


def test_random_order_matches_analytic_expectation():
    # docs/baselines.md §2.1: N = 10^4, F = 10^3 -> RAUC-ALL about 0.526; RAUC-n = F/N for n <= F
    N, F = 10_000, 1_000
    flags = np.zeros(N, bool)
    flags[:F] = True
    rng = np.random.default_rng(0)
    sims = [rng.permutation(flags) for _ in range(40)]
    assert expected_random_rauc(N, F) == pytest.approx((N + 1) / (2 * N - F + 1))
    assert np.mean([rauc(s) for s in sims]) == pytest.approx(expected_random_rauc(N, F), abs=0.005)
    assert np.mean([rauc(s, 500) for s in sims]) == pytest.approx(F / N, abs=0.01)
    assert expected_random_rauc(N, F, 500) == pytest.approx(F / N)


def test_apfd_worked_example():
    flags = np.zeros(10, bool)
    flags[[1, 2, 5, 9]] = True  # ranks 2, 3, 6, 10
    assert apfd(flags) == pytest.approx(0.525)


def test_fault_types_counts_ordered_pairs_in_the_budget():
    y = np.array([0, 1, 0, 1, 2, 2])
    p = np.array([1, 0, 1, 1, 0, 2])  # faults: 0->1, 1->0, 0->1, 2->0
    order = np.arange(6)
    assert fault_types(y, p, order, 1) == 1
    assert fault_types(y, p, order, 2) == 2  # (0->1) and (1->0) are different types
    assert fault_types(y, p, order, 3) == 2  # a repeated type does not count again
    assert fault_types(y, p, order, 6) == 3
    assert fault_types(y, p, order[::-1], 1) == 0  # the last input is correct
    assert fault_types(y, p, order[::-1], 2) == 1  # then 2->0


def test_order_breaks_ties_by_seed_not_by_index():
    s = np.array([1.0, 5.0, 5.0, 5.0, 0.0, np.nan])
    o1 = order_from_scores(s, 1)
    assert set(o1[:3]) == {1, 2, 3} and o1[3] == 0 and o1[4] == 4 and o1[5] == 5
    orders = {tuple(order_from_scores(s, seed)[:3]) for seed in range(20)}
    assert len(orders) > 1  # ties are not always resolved the same way
    assert np.array_equal(o1, order_from_scores(s, 1))  # but reproducibly for one seed


def test_evaluate_order_reports_every_metric():
    y = np.array([0, 0, 1, 1])
    p = np.array([1, 0, 1, 0])
    m = evaluate_order(np.array([0, 3, 1, 2]), y, p, budgets=(1, 2), fault_fractions=(50,))
    assert m["rauc_all"] == pytest.approx(1.0)
    assert m["rauc_1"] == pytest.approx(1.0)
    assert m["fault_types_50pct"] == 2
    assert m["apfd"] == pytest.approx(1 - 3 / 8 + 1 / 8)
