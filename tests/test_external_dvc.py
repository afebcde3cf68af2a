"""A model trained elsewhere goes through `dvc repro` into the report, with training skipped.

The "elsewhere" run is a plain training loop with a user's own CNN that kept its checkpoints
with `ncip.CheckpointWriter`; params.yaml describes it under `external`.
"""

import json
import subprocess
import sys

import numpy as np
import pytest
import torch
import torch.nn.functional as F
import yaml
from helpers import USER_NET, copy_plot_templates, copy_project, dvc_env

pytestmark = pytest.mark.slow

NET = USER_NET  # a user's own CNN (tests/helpers.py)


def run(cmd, cwd, env):
    r = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=3600)
    assert r.returncode == 0, f"{' '.join(cmd)} failed:\n{r.stdout}\n{r.stderr}"
    return r.stdout + r.stderr


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    from ncip.study.data import prepare_dataset
    from ncip.tool.writer import CheckpointWriter

    d = tmp_path_factory.mktemp("external")
    copy_project(d)
    ext = d / "data" / "external" / "digits-mynet"
    (ext / "ckpt").mkdir(parents=True)
    (d / "data" / "external" / "README.md").write_text("external runs\n")
    (ext / "usermodel.py").write_text(NET)
    # "elsewhere": a plain loop on digits that keeps its checkpoints with the writer
    _, splits = prepare_dataset("digits")
    for part, s in splits.items():
        np.savez(ext / f"{part}.npz", x=s.x, y=s.y, ids=s.ids)
    sys.path.insert(0, str(ext))
    from usermodel import Net

    torch.manual_seed(0)
    model = Net()
    opt = torch.optim.Adam(model.parameters(), 3e-3)
    writer = CheckpointWriter(ext / "ckpt", input_shape=[1, 8, 8], plot=False)
    x = torch.from_numpy(splits["train"].x).float().div(255)
    y = torch.from_numpy(splits["train"].y)
    for epoch in range(1, 9):
        for i in range(0, len(x), 64):
            loss = F.cross_entropy(model(x[i : i + 64]), y[i : i + 64])
            opt.zero_grad()
            loss.backward()
            opt.step()
        writer.save(model, epoch=epoch)
    params = yaml.safe_load((d / "params.yaml").read_text())
    params.update(k=3, subjects=["digits-mynet"], runs=[0])
    params["external"] = {
        "digits-mynet": {
            "checkpoints": "data/external/digits-mynet/ckpt",
            "data": "data/external/digits-mynet",
            "model": "data/external/digits-mynet/usermodel.py:Net",
            "paper": "mnist-lenet5",
        }
    }
    params["baselines"].update(random={"repeats": 2}, dropout={"samples": 20})
    params["attack"]["cw_steps"] = 10
    params["analysis"].update(weak_steps="2,4", tsne_points=200)
    params["retrain"]["seeds"] = 1
    (d / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    env = dvc_env()
    dvc = [sys.executable, "-m", "dvc"]
    run(["git", "init", "-q"], d, env)
    run(dvc + ["init", "-q"], d, env)
    copy_plot_templates(d)
    # the import is a step of its own, before the pipeline: no stage uses the tool
    imported = run([sys.executable, "-m", "ncip", "import-external"], d, env)
    run(["git", "add", "-A"], d, env)
    run(["git", "commit", "-qm", "init"], d, env)
    out = run(dvc + ["repro"], d, env)
    return d, env, dvc, imported + out


def test_an_external_subject_runs_through_dvc_repro_into_the_report(repo):
    d, _, _, out = repo
    assert "Running stage 'train-with-checkpoints@digits-mynet-0'" in out
    assert "imported 8 checkpoints of digits-mynet" in out
    models = sorted((d / "models" / "digits-mynet" / "run-0").glob("*.safetensors"))
    assert len(models) == 8  # one per writer checkpoint; nothing was trained
    meta = json.loads(
        json.loads(
            subprocess.run(
                [
                    sys.executable,
                    "-c",
                    "import json,sys; from safetensors import safe_open; "
                    f"print(json.dumps(safe_open('{models[-1]}', 'pt').metadata()))",
                ],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
        )["ncip"]
    )
    assert meta["arch"] == "external" and meta["source"].endswith("epoch-008.safetensors")
    report = (d / "metrics" / "report.md").read_text()
    assert "## Models trained elsewhere" in report and "digits-mynet" in report
    clean = json.loads((d / "metrics" / "clean.json").read_text())
    for method in ("ncip", "deepgini", "lsa", "dsa", "tdpr", "random"):
        assert 0 < clean["rauc_all"][method]["digits-mynet"] <= 1, method
    assert "digits-mynet (ours) | paper" in report  # compared with the paper's MNIST LeNet-5
    assert clean["rauc_all"]["ncip"]["digits-mynet"] > clean["rauc_all"]["random"]["digits-mynet"]


def test_a_changed_external_checkpoint_is_reimported_and_training_stays_skipped(repo):
    d, env, dvc, _ = repo
    status = run(dvc + ["status"], d, env)
    assert "changed" not in status
    f = d / "data" / "external" / "digits-mynet" / "ckpt" / "epoch-008.safetensors"
    from safetensors import safe_open
    from safetensors.torch import save_file

    with safe_open(str(f), "pt") as h:
        meta, tensors = h.metadata(), {k: h.get_tensor(k) for k in h.keys()}  # noqa: SIM118
    tensors["classifier.bias"] = tensors["classifier.bias"] + 0.01
    save_file(tensors, str(f), metadata=meta)
    # the study refuses an import older than its sources, with the fix
    r = subprocess.run(
        dvc + ["repro", "train-with-checkpoints@digits-mynet-0"],
        cwd=d,
        env=env,
        capture_output=True,
        text=True,
    )
    assert r.returncode != 0
    assert "run `ncip import-external digits-mynet` again" in r.stdout + r.stderr
    run([sys.executable, "-m", "ncip", "import-external", "digits-mynet"], d, env)
    out = run(dvc + ["repro", "train-with-checkpoints@digits-mynet-0"], d, env)
    assert "Running stage 'prepare-data@digits-mynet'" in out
    assert "Running stage 'train-with-checkpoints@digits-mynet-0'" in out
