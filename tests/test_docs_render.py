"""Numbers in docs/ that cannot drift (issue 48 item 3): every block scripts/render_docs.py
renders is what the committed page holds, and the renderer fails loudly without its markers."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("render_docs", ROOT / "scripts" / "render_docs.py")
render_docs = importlib.util.module_from_spec(spec)
spec.loader.exec_module(render_docs)


def _have_r_tables() -> bool:
    from ncip.study.datasets import uci

    dirs = (ROOT / "data" / "raw" / "r-cran", uci.user_cache(), uci.SYSTEM_R)
    return all(any((d / p / "data").is_dir() for d in dirs) for p in uci.PACKAGES)


@pytest.mark.parametrize("name", sorted(render_docs.RENDERERS))
def test_each_rendered_block_is_what_the_committed_page_holds(name):
    page, render = render_docs.RENDERERS[name]
    if name == "tables" and not _have_r_tables():
        pytest.skip("the r-cran-* data packages are not here (scripts/setup.sh downloads them)")
    text = (ROOT / page).read_text()
    assert render_docs.replace_block(text, name, render()) == text, (
        f"{page} differs from what scripts/render_docs.py renders: run `make docs`"
    )


def test_a_page_without_the_markers_is_refused():
    with pytest.raises(SystemExit, match="no <!-- render:tables --> block"):
        render_docs.replace_block("no markers here", "tables", "x")
    filled = render_docs.replace_block(
        "a\n<!-- render:t -->\nold\n<!-- /render:t -->\nb", "t", "new"
    )
    assert filled == "a\n<!-- render:t -->\nnew\n<!-- /render:t -->\nb"


def test_the_text_cost_line_sums_each_stage_and_the_transformers_share(tmp_path):
    """The text block's last line: minutes per stage that took a minute or more, largest
    first, with the part spent on Transformer subjects; a faster stage is left out."""
    import json

    cost = {
        "stages": {
            "score-baselines": {
                "wordnet10-textcnn/run-0": 30.0,
                "wordnet10-transformer/run-0": 90.0,
            },
            "train-with-checkpoints": {
                "wordnet10-textcnn/run-0": 120.0,
                "wordnet10-transformer/run-0": 300.0,
                "wordnet10-transformer-e16/run-0": 60.0,  # a variant is still a Transformer
            },
            "score-ncip": {"wordnet10-textcnn/run-0": 1.0, "wordnet10-transformer/run-0": 2.0},
        }
    }
    (tmp_path / "cost.json").write_text(json.dumps(cost))
    line = render_docs._text_cost(tmp_path / "cost.json")
    assert "10.1 in all stages" in line  # 603 s
    assert line.index("train-with-checkpoints 8.0 (Transformers 6.0)") < line.index(
        "score-baselines 2.0 (Transformers 1.5)"
    )
    assert "score-ncip" not in line
