import json

import numpy as np
import pytest
from test_stages import invoke

from ncip.core.checkpoints import list_checkpoints, load_model
from ncip.study.attacks import (
    ATTACKS,
    AttackConfig,
    attack_split,
    check_attack_names,
    combine,
    parse_number,
    source_ids,
)
from ncip.study.predict import batched_outputs

FAST = AttackConfig(cw_steps=10)  # CW at 10 steps keeps the test quick; others as in Table 2


@pytest.fixture(scope="module")
def victim(tiny_run):
    model = load_model(list_checkpoints(tiny_run["dir"] / "models")[-1].path)
    return model, tiny_run["splits"]["test"].subset(np.arange(60))


def _accuracy(model, split):
    return float((batched_outputs(model, split.x).argmax(1) == split.y).mean())


@pytest.mark.parametrize("name", ATTACKS)
def test_attacks_lower_accuracy_and_keep_inputs_valid(victim, name):
    model, clean = victim
    adv = attack_split(model, clean, name, FAST, seed=1)
    assert adv.x.dtype == np.float32 and adv.x.shape == clean.x.shape
    assert adv.x.min() >= 0.0 and adv.x.max() <= 1.0
    assert np.array_equal(adv.y, clean.y)  # true labels are kept
    assert np.array_equal(source_ids(adv.ids), clean.ids)  # and the source id
    assert len(set(adv.ids)) == len(adv)
    assert _accuracy(model, adv) <= _accuracy(model, clean)
    if name != "cw":  # the L-inf attacks stay inside the eps-ball
        delta = np.abs(adv.x - clean.x / 255.0)
        assert delta.max() <= FAST.eps + 1e-6


def test_pgd_lowers_accuracy_substantially(victim):
    # 8/255 is below one grey level of the 8x8 digits (16/255), so use MNIST's usual 0.3 here
    model, clean = victim
    adv = attack_split(model, clean, "pgd", AttackConfig(eps=0.3, step=0.05), seed=0)
    assert _accuracy(model, adv) < _accuracy(model, clean) - 0.3


@pytest.mark.parametrize("name", ["pgd", "cw"])
def test_same_seed_gives_identical_tensors(victim, name):
    model, clean = victim
    a = attack_split(model, clean, name, FAST, seed=5)
    b = attack_split(model, clean, name, FAST, seed=5)
    assert np.array_equal(a.x, b.x)
    if name == "pgd":  # the random start depends on the seed
        assert not np.array_equal(a.x, attack_split(model, clean, name, FAST, seed=6).x)


def test_combined_set_holds_every_attack(victim):
    model, clean = victim
    sets = {n: attack_split(model, clean, n, FAST) for n in ("fgsm", "bim")}
    both = combine(sets)
    assert len(both) == 2 * len(clean) and len(set(both.ids)) == len(both)


def test_bad_attack_names_and_parameters():
    with pytest.raises(ValueError, match=r"unknown attack\(s\) \['deepfool'\].*fgsm"):
        check_attack_names(["fgsm", "deepfool"])
    with pytest.raises(ValueError, match="twice"):
        check_attack_names(["pgd", "pgd"])
    for cfg, match in (
        (AttackConfig(eps=0), "eps"),
        (AttackConfig(eps=2.0), "eps"),
        (AttackConfig(step=0.5), "step"),
        (AttackConfig(cw_c=0), "cw_c"),
        (AttackConfig(steps=0), "steps"),
    ):
        with pytest.raises(ValueError, match=match):
            cfg.validate()
    assert parse_number("8/255") == pytest.approx(8 / 255)
    with pytest.raises(ValueError, match="fraction"):
        parse_number("eight")


def test_stage_writes_sets_and_report_and_rejects_bad_input(tiny_run, tmp_path):
    d = tiny_run["dir"]
    small = tmp_path / "data"
    small.mkdir()
    from ncip.study.data import save_split

    for name in ("test", "val"):
        save_split(small / f"{name}.npz", tiny_run["splits"][name].subset(np.arange(30)))
    (small / "info.json").write_text((d / "data" / "info.json").read_text())
    out, rep = tmp_path / "adv", tmp_path / "attacks.json"
    r = invoke(
        "generate_adversarial",
        "--checkpoints",
        d / "models",
        "--data",
        small,
        "--out",
        out,
        "--metrics-out",
        rep,
        "--cw-steps",
        5,
    )
    assert r.exit_code == 0, r.output
    names = sorted(p.name for p in out.glob("*.npz"))
    assert names == sorted(
        [f"{p}{s}.npz" for p in ("adv", "val-adv") for s in ("", "-fgsm", "-pgd", "-bim", "-cw")]
    )
    report = json.loads(rep.read_text())
    for a in ATTACKS:
        t = report["attacks"][a]["test"]
        assert t["adversarial_accuracy"] <= t["clean_accuracy"]
        assert 0 <= t["success_rate"] <= 1
    assert report["attacks"]["fgsm"]["test"]["linf_max"] <= 8 / 255 + 1e-6
    before = sorted(out.iterdir())
    r = invoke(
        "generate_adversarial",
        "--checkpoints",
        d / "models",
        "--data",
        small,
        "--out",
        out,
        "--metrics-out",
        rep,
        "--attacks",
        "fgsm,jsma",
    )
    assert r.exit_code == 2 and "unknown attack" in r.output
    assert sorted(out.iterdir()) == before
    r = invoke(
        "generate_adversarial",
        "--checkpoints",
        d / "models",
        "--data",
        small,
        "--out",
        out,
        "--metrics-out",
        rep,
        "--eps",
        "8/0",
    )
    assert r.exit_code == 2 and "8/0" in r.output
