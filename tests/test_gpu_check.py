"""scripts/gpu_check.sh in its CPU dry mode: the whole study on a CIFAR-10-format ResNet-18
runs and prints one table with every stage's time."""

import subprocess

import pytest
from helpers import ROOT


@pytest.mark.slow
def test_the_device_check_runs_every_stage_in_its_dry_mode(tmp_path):
    out = tmp_path / "check.txt"
    r = subprocess.run(
        ["bash", str(ROOT / "scripts" / "gpu_check.sh"), "--dry", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=3600,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    table = out.read_text()
    assert "ncip device check (dry, CPU-sized)" in table
    for stage in (
        "prepare-data",
        "train-with-checkpoints",
        "select-checkpoints",
        "generate-adversarial",
        "predict-probabilities",
        "score-ncip",
        "score-baselines",
        "evaluate-rauc",
        "analyze-checkpoints",
        "retrain-ncip",
        "report",
    ):
        assert f"| {stage}" in table


@pytest.mark.parametrize("size", ["dry", "gpu"])
def test_both_sizes_make_valid_study_parameters(tmp_path, size):
    import sys

    import yaml

    sys.path.insert(0, str(ROOT / "scripts"))
    import gpu_check

    from ncip.study.subjects import check_params

    p = tmp_path / "params.yaml"
    p.write_text(yaml.safe_dump(gpu_check.study_params(gpu_check.SIZES[size])))
    assert check_params(p) == (["cifar10-resnet18"], [0])
