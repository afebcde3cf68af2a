import numpy as np
import pytest
import scipy.stats
import torch
import torch.nn as nn

from ncip.core.checkpoints import list_checkpoints
from ncip.core.models import Classifier, textcnn, transformer
from ncip.core.scores import deepgini, softmax64
from ncip.study.scores import ScoringContext, get_method, list_methods, method_info
from ncip.study.scores.dropout import lexicographic, mc_dropout_probs, variation_ratio
from ncip.study.scores.effimap import (
    Mutant,
    apply_mutant,
    effimap_scores,
    forward_features,
    kill_matrix,
    search_mutants,
)
from ncip.study.scores.nns import nns
from ncip.study.scores.sets import minmax_scale, sets_budget, sets_order_scores, sets_select
from ncip.study.scores.surprise import ClassKDE, dsa, lsa
from ncip.study.scores.tdpr import rank_scores, train_ranker, trajectory_features

# --- LSA / DSA ----------------------------------------------------------------------------------


def test_kde_logpdf_equals_scipy():
    rng = np.random.default_rng(0)
    data = rng.normal(size=(200, 4)) @ rng.normal(size=(4, 4))
    x = rng.normal(size=(30, 4)) * 2
    ours = ClassKDE(data).logpdf(x)
    ref = scipy.stats.gaussian_kde(data.T).logpdf(x.T)
    assert ours == pytest.approx(ref, rel=1e-9, abs=1e-9)


def test_lsa_per_predicted_class_against_scipy():
    rng = np.random.default_rng(1)
    train = np.concatenate([rng.normal(0, 1, (80, 3)), rng.normal(5, 1, (80, 3))])
    train_pred = np.repeat([0, 1], 80)
    test = rng.normal(2, 2, (20, 3))
    test_pred = rng.integers(0, 2, 20)
    s = lsa(train, train_pred, test, test_pred)
    for c in (0, 1):
        kde = scipy.stats.gaussian_kde(train[train_pred == c].T)
        idx = test_pred == c
        assert s[idx] == pytest.approx(-kde.logpdf(test[idx].T))


def test_lsa_drops_low_variance_neurons_and_handles_empty_classes():
    rng = np.random.default_rng(2)
    train = np.column_stack([rng.normal(size=60), np.full(60, 3.0), rng.normal(size=60)])
    pred = np.repeat([0, 1], 30)
    test = rng.normal(size=(5, 3))
    s = lsa(train, pred, test, np.array([0, 1, 0, 7, 1]))
    kde = scipy.stats.gaussian_kde(train[pred == 0][:, [0, 2]].T)
    assert s[0] == pytest.approx(-kde.logpdf(test[[0]][:, [0, 2]].T)[0])
    assert np.isinf(s[3]) and s[3] > 0  # class 7 has no training members: tested first


def test_dsa_measures_dist_b_from_the_reference_point():
    train = np.array([[0.0, 0.0], [1.0, 0.0], [3.0, 0.0]])
    pred = np.array([0, 0, 1])
    test = np.array([[0.9, 0.0], [3.5, 0.0]])
    s = dsa(train, pred, test, np.array([0, 1]))
    # x = 0.9: x_a = (1, 0), dist_a = 0.1, dist_b = |(1,0) - (3,0)| = 2 (from x it would be 2.1)
    assert s[0] == pytest.approx(0.1 / 2.0)
    # x = 3.5 predicted 1: x_a = (3, 0), dist_a = 0.5, dist_b = 2 (to (1, 0))
    assert s[1] == pytest.approx(0.5 / 2.0)


def test_dsa_scales_in_chunks_to_many_training_points():
    rng = np.random.default_rng(3)
    train = rng.normal(size=(5000, 8))
    pred = rng.integers(0, 10, 5000)
    s = dsa(train, pred, rng.normal(size=(300, 8)), rng.integers(0, 10, 300))
    assert s.shape == (300,) and np.all(np.isfinite(s)) and np.all(s > 0)


# --- NNS ------------------------------------------------------------------------------------------


def test_nns_with_lambda_one_is_deepgini():
    logits = np.random.default_rng(4).normal(size=(50, 5))
    assert nns(softmax64(logits), k=10, lam=1.0) == pytest.approx(deepgini(logits))


def test_nns_smooths_towards_the_neighbours():
    p = np.array([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0]])
    s = nns(p, k=1, lam=0.5)
    # sample 0's nearest neighbour is sample 1: p~ = (0.95, 0.05) -> 1 - 0.9025 - 0.0025
    assert s[0] == pytest.approx(1 - 0.95**2 - 0.05**2)
    assert s[0] > 0.0 == pytest.approx(1 - 1.0)  # plain DeepGini would give 0


def test_nns_keeps_saturated_outputs_apart():
    """Near-one-hot smoothed rows: 1 - sum p~^2 rounds to exactly 0 for all of them (the
    old formula tied them in one block); the others' total does not."""
    z = np.zeros((6, 3))
    z[:, 0] = [40, 41, 42, 43, 44, 45]  # every row saturated, each less so than the next
    p = softmax64(z)
    assert np.all(1.0 - (p**2).sum(axis=1) == 0.0)  # the naive formula ties all six
    s = nns(p, k=2, lam=0.5)
    assert len(set(s.tolist())) == 6 and np.all(s > 0)
    plain = nns(p, k=2, lam=1.0)  # no smoothing: DeepGini, least confident first
    assert list(np.argsort(-plain)) == [0, 1, 2, 3, 4, 5]


# --- SETS -----------------------------------------------------------------------------------------


def _naive_sets(F, u, b, a=3.0, ridge=1e-6):
    pool = np.argsort(-u, kind="stable")[: min(len(u), max(1, int(np.floor(a * b))))]
    S, gs = [], 0.0
    for k in range(b):
        chunk = pool[k::b]
        if len(chunk) == 0:
            continue
        gd = np.array(
            [
                np.linalg.slogdet(F[S + [i]] @ F[S + [i]].T + ridge * np.eye(len(S) + 1))[1]
                for i in chunk
            ]
        )
        g = gd - gs
        norm = (g - g.min()) / (g.max() - g.min() + 0.5) if g.max() > g.min() else 0 * g
        j = int(np.argmax(u[chunk] * norm))
        S.append(int(chunk[j]))
        gs = gd[j]
    return S


def test_sets_matches_a_brute_force_log_det():
    rng = np.random.default_rng(5)
    F = minmax_scale(rng.normal(size=(40, 6)))
    u = rng.random(40)  # distinct, so the pool order needs no tie-break
    for b in (3, 5, 10):
        assert sets_select(F, u, b).tolist() == _naive_sets(F, u, b)


def test_the_sets_budget_is_a_share_of_the_split_unless_an_absolute_one_is_set():
    from ncip.study.scores.registry import resolve_options

    assert sets_budget(10_000, 0.05) == 500  # SETS(500) on the paper's 10,000 inputs
    assert sets_budget(1_000, 0.05) == 50  # not 500 of 1,000 (pool = the whole set)
    assert sets_budget(10, 0.01) == 1 and sets_budget(1_000, 0.05, 500) == 500
    assert sets_budget(100, 0.05, 500) == 100
    with pytest.raises(ValueError, match="budget_share"):
        sets_budget(100, 0.0)
    opts = resolve_options({"sets": {"budget": 500}}, ["sets"])["sets"]
    assert opts == {"budget_share": 0.05, "budget": 500, "a": 3.0}  # one parameter away


def test_sets_on_a_pool_smaller_than_the_budget_takes_the_pool_by_uncertainty():
    u = np.array([0.1, 0.5, 0.3, 0.9, 0.2])
    F = np.random.default_rng(6).random((5, 3))
    assert sets_select(F, u, 10).tolist() == [3, 1, 2, 4, 0]
    s = sets_order_scores(F, u, 2)
    order = np.argsort(-s)
    assert set(order[:2]) <= {3, 1, 2, 4, 0} and sorted(order.tolist()) == list(range(5))


# --- TDPR -----------------------------------------------------------------------------------------


def test_tdpr_features_on_a_hand_written_trajectory():
    # one input, 4 epochs, 3 classes; predictions 1, 2, 2, 0 (final = 0)
    p = np.array([[[0.2, 0.7, 0.1]], [[0.1, 0.2, 0.7]], [[0.2, 0.2, 0.6]], [[0.5, 0.3, 0.2]]])
    f = trajectory_features(p, start=1)[0]
    labels = np.array([2, 2, 0])  # epochs from index 1
    H = -(p[:, 0] * np.log2(p[:, 0])).sum(1)
    cos = (p[:3, 0] @ p[3, 0]) / (np.linalg.norm(p[:3, 0], axis=1) * np.linalg.norm(p[3, 0]))
    assert f[0] == pytest.approx(labels.std())
    assert f[1] == pytest.approx(H[1:].mean()) and f[2] == pytest.approx(H[1:].std())
    assert f[3] == 2  # label 2 appears twice among the earlier epochs and differs from 0
    assert f[4] == pytest.approx((1 - cos).mean())


def test_tdpr_ranker_learns_which_trajectories_fail():
    rng = np.random.default_rng(7)
    feats = rng.random((400, 5))
    faults = feats[:, 4] > 0.7
    booster = train_ranker(feats, faults, seed=0)
    s = rank_scores(booster, feats)
    assert s[faults].mean() > s[~faults].mean()
    assert np.array_equal(s, rank_scores(train_ranker(feats, faults, seed=0), feats))


# --- Dropout --------------------------------------------------------------------------------------


def test_variation_ratio_and_entropy_tie_break():
    votes = np.array([[0, 0, 0, 0], [0, 1, 0, 1], [2, 2, 2, 1]])
    assert variation_ratio(votes, 3).tolist() == [0.0, 0.5, 0.25]
    s = lexicographic(np.array([0.25, 0.25, 0.5]), np.array([2.0, 1.0, 0.0]), 0.25)
    assert np.argsort(-s).tolist() == [2, 0, 1]  # VR first, then predictive entropy


class _WithBNAndDropout(nn.Module):
    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm1d(4)
        self.drop = nn.Dropout(0.5)
        self.head = nn.Linear(4, 3)

    def features(self, x):
        return self.drop(self.bn(x))

    def forward(self, x):
        return self.head(self.features(x))


def test_mc_dropout_switches_only_dropout_modules_on():
    m = _WithBNAndDropout()
    m.bn.running_mean.fill_(100.0)  # batch statistics would differ wildly from these
    x = np.random.default_rng(8).normal(size=(16, 4)).astype(np.float32)
    seen = []
    m.bn.register_forward_hook(lambda mod, i, o: seen.append(mod.training))
    mean, votes = mc_dropout_probs(m, x, samples=5, rate=0.5, seed=0)
    assert seen and not any(seen)  # BatchNorm stayed in eval mode
    assert not m.training and not m.drop.training  # restored afterwards
    mean2, votes2 = mc_dropout_probs(m, x, samples=5, rate=0.5, seed=0)
    assert np.array_equal(votes, votes2) and np.allclose(mean, mean2)  # seeded


def _full_passes(model, x, samples, seed):
    """MC-Dropout written out: every module that drops in train mode, T full forward passes."""
    torch.manual_seed(seed)
    model.eval()
    for m in model.modules():
        if isinstance(m, (nn.Dropout, nn.MultiheadAttention, nn.TransformerEncoderLayer)):
            m.train()
    with torch.inference_mode():
        probs = [torch.softmax(model(torch.as_tensor(x)).double(), 1) for _ in range(samples)]
    model.eval()
    return (sum(probs) / samples).numpy(), torch.stack([p.argmax(1) for p in probs], 1).numpy()


def _tokens(n=48, length=12, vocab=60, seed=3):
    x = np.random.default_rng(seed).integers(1, vocab, size=(n, length))
    x[: n // 2, length // 2 :] = 0  # padding, as the text sets have
    return x


def test_mc_dropout_samples_the_transformer_attention_and_residual_dropout():
    # nn.TransformerEncoderLayer in eval mode runs a fused kernel without dropout: switching
    # only its nn.Dropout children on gave T identical passes (Dropout = Entropy on the text
    # study's Transformers). Every pass must differ, and equal T full passes in train mode.
    torch.manual_seed(0)
    m = transformer(4, 60)
    x = _tokens()
    mean, votes = mc_dropout_probs(m, x, samples=30, rate=0.5, seed=1)
    assert variation_ratio(votes, 4).max() > 0
    want_mean, want_votes = _full_passes(m, x, 30, 1)
    assert np.array_equal(votes, want_votes) and np.allclose(mean, want_mean)
    assert not any(mod.training for mod in m.modules())  # restored afterwards


def test_mc_dropout_runs_a_last_step_dropout_alone_with_the_full_passes_result():
    # the TextCNN's only dropout is the last step of its features: the convolutions run once
    # per batch, and the result is bit for bit that of T full passes
    torch.manual_seed(0)
    m = textcnn(3, 60)
    x = _tokens()
    calls = []
    m.backbone.convs[0].register_forward_hook(lambda *a: calls.append(1))
    mean, votes = mc_dropout_probs(m, x, samples=25, rate=0.5, seed=2, batch_size=len(x))
    assert len(calls) == 1
    want_mean, want_votes = _full_passes(m, x, 25, 2)
    assert np.array_equal(votes, want_votes) and np.array_equal(mean, want_mean)
    assert variation_ratio(votes, 3).max() > 0


class _DropThenScale(nn.Module):  # dropout, then an in-place step: not the last step
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 6)
        self.drop = nn.Dropout(0.3)

    def forward(self, x):
        return self.drop(self.lin(x)).mul_(2.0)


def test_mc_dropout_runs_full_passes_where_dropout_is_not_the_last_step():
    torch.manual_seed(0)
    m = Classifier(_DropThenScale(), nn.Linear(6, 3))
    x = np.random.default_rng(4).normal(size=(20, 4)).astype(np.float32)
    mean, votes = mc_dropout_probs(m, x, samples=15, rate=0.5, seed=5)
    want_mean, want_votes = _full_passes(m, x, 15, 5)
    assert np.array_equal(votes, want_votes) and np.allclose(mean, want_mean)


# --- EffiMAP --------------------------------------------------------------------------------------


class _ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.conv = nn.Conv2d(1, 3, 3, padding=1)
        self.bn = nn.BatchNorm2d(3).eval()
        self.act = nn.LeakyReLU(0.1)
        self.head = nn.Linear(3 * 4 * 4, 2)

    def forward(self, x):
        return self.head(self.act(self.bn(self.conv(x))).flatten(1))


def _module_io(net, module, x, mutant=None):
    """(input, output) of one module during a forward pass, optionally with a mutant applied."""
    seen = {}
    target = dict(net.named_modules())[module]
    h = target.register_forward_hook(lambda mod, i, o: seen.__setitem__("io", (i[0], o)))
    m = apply_mutant(net, mutant) if mutant else None  # registered after: sees the output first
    with torch.no_grad():
        net(x)
    h.remove()
    if m:
        m.remove()
    return seen["io"]


@pytest.mark.parametrize("kind,module", [("conv", "conv"), ("bn", "bn"), ("leaky", "act")])
def test_effimap_mutants_change_only_the_mutated_channel(kind, module):
    net = _ConvNet()
    x = torch.rand(5, 1, 4, 4) - 0.5
    _, base = _module_io(net, module, x)
    inp, _ = _module_io(net, module, x, Mutant(module, kind, 1, seed=3))
    # the recording hook runs before the mutant's; the mutant's output is what flows on
    outs = {}
    target = dict(net.named_modules())[module]
    m = apply_mutant(net, Mutant(module, kind, 1, seed=3))
    h = target.register_forward_hook(lambda mod, i, o: outs.__setitem__("o", o))
    with torch.no_grad():
        net(x)
    m.remove(), h.remove()
    mutated = outs["o"]
    assert torch.equal(mutated[:, [0, 2]], base[:, [0, 2]])  # other channels untouched
    if kind == "conv":
        assert torch.all(mutated[:, 1] == 0)
    elif kind == "bn":
        assert torch.equal(mutated[:, 1], inp[:, 1])  # bypassed: the channel's input
    else:
        changed = mutated[:, 1] != base[:, 1]
        assert changed.any() and torch.all(base[:, 1][changed] < 0)


def test_effimap_scores_and_features():
    kills = np.array([[1, 1, 0, 0], [0, 0, 0, 0], [1, 1, 1, 1]])
    logits = np.log(np.array([[0.5, 0.5], [0.5, 0.5], [0.9, 0.1]]))
    s = effimap_scores(kills, logits)
    assert s == pytest.approx([0.5 * np.log(2), 0.0, np.log(1 / 0.9)])
    net = _ConvNet().eval()
    f = forward_features(net, np.random.default_rng(0).random((4, 1, 4, 4), dtype=np.float32))
    assert f.shape == (4, 2 + 2 + 3 + 3)  # conv, bn (mean, var); leaky (+neg); linear (+entropy)


def test_effimap_search_keeps_useful_mutants_only():
    from ncip.study.data import Split

    net = _ConvNet().eval()
    rng = np.random.default_rng(1)
    x = rng.random((64, 1, 4, 4), dtype=np.float32)
    with torch.no_grad():
        y = net(torch.from_numpy(x)).argmax(1).numpy()
    y[:8] = 1 - y[:8]  # some inputs are misclassified
    mutants = search_mutants(net, Split(x, y, np.arange(64).astype(str)), 100, None, 60.0)
    k = kill_matrix(net, mutants, x)
    assert all(k[:, j].any() for j in range(len(mutants)))  # every kept mutant changes something


# --- through the registry, on the tiny trained model ----------------------------------------------


@pytest.fixture(scope="module")
def ctx(tiny_run):
    s = tiny_run["splits"]
    return ScoringContext(
        subject="digits-lenet5",
        seed=0,
        checkpoint_dir=tiny_run["dir"] / "models",
        eval_splits={"test": s["test"]},
        train=s["train"],
        labelled={"test": s["val"]},
        options={
            "dropout": {"samples": 20},
            "effimap": {"labelled_inputs": 40, "input_mutants": 3, "vae_epochs": 1, "trees": 5},
        },
    )


@pytest.mark.parametrize("name", list_methods())
def test_every_baseline_scores_every_input_deterministically(ctx, tiny_run, name):
    s1 = get_method(name).score(ctx, "test")
    s2 = get_method(name).score(ctx, "test")
    runs1, runs2 = (s if isinstance(s, dict) else {0: s} for s in (s1, s2))
    assert runs1.keys() == runs2.keys() and runs1
    for r in runs1:
        assert runs1[r].shape == (len(tiny_run["splits"]["test"]),)
        assert not np.isnan(runs1[r]).any()
        assert np.array_equal(runs1[r], runs2[r])


def test_methods_never_see_the_test_labels(ctx):
    assert (ctx.split("test").y == -1).all()


@pytest.mark.parametrize("name", list_methods())
def test_a_method_without_what_it_registers_it_needs_says_so(tiny_run, name):
    """A context with only the test set: a method that registered `train` or `labelled` as a
    need stops with that named; the others score."""
    s = tiny_run["splits"]
    bare = ScoringContext(
        subject="x",
        seed=0,
        checkpoint_dir=tiny_run["dir"] / "models",
        eval_splits={"test": s["test"]},
        options={"dropout": {"samples": 5}},
    )
    needs = method_info(name).needs
    if "train" in needs or "labelled" in needs:
        with pytest.raises(ValueError, match="training split" if "train" in needs else "labelled"):
            get_method(name).score(bare, "test")
    else:
        assert get_method(name).score(bare, "test") is not None
    assert len(list_checkpoints(tiny_run["dir"] / "models")) == 6


def test_effimap_vae_makes_input_mutants_near_their_source(tiny_run):
    from ncip.core.checkpoints import load_model
    from ncip.study.predict import batched_outputs
    from ncip.study.scores.effimap_vae import train_vae, vae_mutants

    val = tiny_run["splits"]["train"]
    model = load_model(list_checkpoints(tiny_run["dir"] / "models")[-1].path)
    vae = train_vae(val.x[:400], seed=0, device="cpu", steps=1000)
    samples = vae_mutants(vae, val.x[:40], 5, seed=0)
    assert samples.shape == (200, 1, 8, 8) and samples.min() >= 0 and samples.max() <= 1
    src = np.repeat(batched_outputs(model, val.x[:40]).argmax(1), 5)
    # a trained generator keeps most mutants in their source's class (an untrained one: ~10%)
    assert (batched_outputs(model, samples).argmax(1) == src).mean() > 0.5
