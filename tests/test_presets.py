"""The paper-scale presets: DVC's own override parser applies each `ncip preset` line to the
study's params.yaml, and the result passes check-params with the paper's epochs."""

import shlex
import shutil
import subprocess
import sys

import pytest
import yaml
from helpers import ROOT

from ncip.study.presets import PAPER_RUNS, PRESETS, set_args
from ncip.study.subjects import check_params


@pytest.mark.parametrize("name", list(PRESETS))
def test_each_preset_line_applies_through_dvc_and_passes_check_params(name, tmp_path):
    from dvc.utils.hydra import apply_overrides

    params = tmp_path / "params.yaml"
    shutil.copy(ROOT / "params.yaml", params)
    line = subprocess.run(
        [sys.executable, "-m", "ncip", "preset", name],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    args = shlex.split(line)
    assert args[:3] == ["dvc", "exp", "run"] and args[3:] == set_args(name)
    apply_overrides(params, args[4::2])  # the values after each -S, as `dvc exp run` does
    subjects, runs = check_params(params)
    p = PRESETS[name]
    assert subjects == list(p.subjects) and runs == list(range(PAPER_RUNS))
    cfg = yaml.safe_load(params.read_text())
    assert cfg["train"]["epochs"] == p.epochs
    assert cfg["train"]["precision"] == ("bf16" if p.gpu else "fp32")
    assert cfg["k"] == 30 and cfg["alpha"] == 0.9  # the paper's NCIP settings are untouched


def test_the_scaling_page_has_every_preset_with_its_subjects_and_epochs():
    section = (ROOT / "docs" / "scaling.md").read_text()
    for p in PRESETS.values():
        assert f"| `{p.name}` | {', '.join(p.subjects)} | {p.epochs} |" in section


def test_an_unknown_preset_is_one_line_and_exit_2():
    r = subprocess.run(
        [sys.executable, "-m", "ncip", "preset", "cifar11"], capture_output=True, text=True
    )
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0 and "cifar10" in r.stderr


def test_the_extended_preset_applies_and_names_enough_independent_subjects(tmp_path):
    """`ncip preset extended` (what `scripts/experiment.sh extended` runs): one run of at least
    16 subjects on at least 12 data sets (issue 40), no two of the same dataset and
    architecture, so Table 5's Holm p can fall below 0.05."""
    from dvc.utils.hydra import apply_overrides

    from ncip.study.presets import EXTENDED
    from ncip.study.report.significance import attainable
    from ncip.study.subjects import parse_subject

    params = tmp_path / "params.yaml"
    shutil.copy(ROOT / "params.yaml", params)
    line = subprocess.run(
        [sys.executable, "-m", "ncip", "preset", "extended"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    args = shlex.split(line)
    apply_overrides(params, args[4::2])
    subjects, runs = check_params(params)
    assert subjects == list(EXTENDED.subjects) and runs == [0]
    pairs = {(parse_subject(s).dataset, parse_subject(s).model) for s in subjects}
    assert len(pairs) == len(subjects) >= 16
    # every subject counts in Table 5 (a variant only where its base is not in the study)
    from ncip.study.report.inputs import independent_subjects

    assert independent_subjects(subjects) == subjects
    assert len({parse_subject(s).dataset for s in subjects}) >= 12  # the primary's units
    assert attainable(len(subjects), 12)["min_p_holm"] < 0.05


def test_the_text_preset_applies_with_three_runs_and_k_below_the_pool(tmp_path):
    """`ncip preset text` (`make text`): the five text subjects, three runs, and a K that
    leaves Algorithm 1 something to choose in the shorter runs."""
    from dvc.utils.hydra import apply_overrides

    from ncip.core.collapse import candidate_pool
    from ncip.study.presets import EXPERIMENTS
    from ncip.study.subjects import parse_subject

    params = tmp_path / "params.yaml"
    shutil.copy(ROOT / "params.yaml", params)
    line = subprocess.run(
        [sys.executable, "-m", "ncip", "preset", "text"], capture_output=True, text=True, check=True
    ).stdout.strip()
    apply_overrides(params, shlex.split(line)[4::2])
    subjects, runs = check_params(params)
    assert subjects == list(EXPERIMENTS["text"].subjects) and runs == [0, 1, 2]
    assert {parse_subject(s).dataset for s in subjects} == {"wordnet10", "wordnet4", "fortunes"}
    cfg = yaml.safe_load(params.read_text())
    for s in subjects:  # K below every subject's pool, its own e<N> epochs included
        epochs = parse_subject(s).epochs or cfg["train"]["epochs"]
        assert cfg["k"] < len(candidate_pool(epochs, cfg["alpha"]))
    # the report's header names the subjects that train for their own epochs
    from types import SimpleNamespace

    from ncip.study.report.sections import header_section

    header = header_section(
        SimpleNamespace(cfg=cfg, subjects=subjects, runs=runs, external={}, aliases={})
    )[2]
    assert f"{cfg['train']['epochs']} epochs (16 for the -e16 subjects) (the paper" in header
    # the MC-Dropout passes it sets reach score-baselines, and its report says so
    from ncip.study.presets import TEXT_DROPOUT_SAMPLES
    from ncip.study.report.sections import _options_set
    from ncip.study.scores.registry import baseline_config

    _, options = baseline_config(cfg["baselines"])
    assert options["dropout"]["samples"] == TEXT_DROPOUT_SAMPLES != 200
    assert _options_set(cfg).endswith(f"Dropout samples = {TEXT_DROPOUT_SAMPLES} (default 200).")
    assert _options_set(yaml.safe_load((ROOT / "params.yaml").read_text())) == ""


@pytest.mark.parametrize("name", ["extended", "text"])
def test_collect_experiment_refuses_a_report_without_its_sections(tmp_path, name):
    from ncip.study.report.significance import EXPERIMENT_SECTIONS

    report = tmp_path / "report.md"
    report.write_text("# r\n\n## Models under test (paper Table 1)\n\nonly this\n")
    args = [sys.executable, str(ROOT / "scripts" / "collect_experiment.py"), "--report",
            str(report), "--seconds", "1", "--command", "c", "--commit", "abc",
            "--out", str(tmp_path / "x.md"), "--name", name]  # fmt: skip
    r = subprocess.run(args, capture_output=True, text=True)
    assert r.returncode == 2 and "lacks the sections" in r.stderr
    assert EXPERIMENT_SECTIONS[name][-1] in r.stderr and not (tmp_path / "x.md").exists()


def test_collect_extended_keeps_the_tables_and_refuses_an_unfinished_report(tmp_path):
    report = tmp_path / "report.md"
    sections = [
        "Primary comparison (fixed before the run)",
        "Models under test (paper Table 1)",
        "RAUC-ALL on clean data (paper Table 3)",
        "Significance: NCIP vs each baseline on RAUC-ALL (paper Table 5)",
        "Paired intervals: NCIP minus each method, per subject",
        "Tied scores",
    ]
    report.write_text("# r\n\n" + "".join(f"## {h}\n\nbody of {h}\n\n" for h in sections))
    out = tmp_path / "extended.md"
    args = [sys.executable, str(ROOT / "scripts" / "collect_experiment.py"), "--report",
            str(report), "--seconds", "125", "--command", "dvc exp run -S x", "--commit", "abc",
            "--out", str(out)]  # fmt: skip
    subprocess.run(args, check=True, capture_output=True)
    text = out.read_text()
    assert "2 min 5 s" in text and "abc" in text
    assert "run-cache" not in text.split("\n")[0]  # no log: nothing said of what DVC did
    log = tmp_path / "exp.log"
    log.write_text(
        "Running stage 'a@x':\n> cmd\ntrain x:  3%|\rtrain x: 100%|\nRunning stage 'b@x':\n"
        "Stage 'c@x' is cached - skipping run, checking out outputs\n"
        "Stage 'd@x' didn't change, skipping\n"
    )
    subprocess.run([*args, "--log", str(log)], check=True, capture_output=True)
    first = out.read_text().split("\n")[0]
    assert first.endswith("DVC ran 2 stages, restored 1 from its run-cache and found 1 unchanged.")
    log.write_text("Running stage 'a@x':\nRunning stage 'b@x':\n")
    subprocess.run([*args, "--log", str(log)], check=True, capture_output=True)
    assert (
        out.read_text()
        .split("\n")[0]
        .endswith("DVC ran 2 stages and restored none from its run-cache.")
    )
    for h in sections[:5]:
        assert f"### {h}" in text and f"body of {h}" in text
    assert "Tied scores" not in text
    report.write_text("# r\n\n## Models under test (paper Table 1)\n\nonly this\n")
    r = subprocess.run(args, capture_output=True, text=True)
    assert r.returncode == 2 and "lacks the sections" in r.stderr
    assert "2 min 5 s" in out.read_text()  # the previous file is left as it was
