"""Render the parts of docs/ that are facts of the data or of committed runs, between
``<!-- render:NAME -->`` and ``<!-- /render:NAME -->`` markers (``make docs``): a test fails when a
committed page differs from what this renders (tests/test_docs_render.py).

- ``tables`` (docs/datasets.md): every table of Debian's R data packages, read as the study reads
  it: rows, features, classes, test inputs, source and package.
- ``findings`` (README.md): what the study finds, from the committed metrics: the extended
  study's two co-primary answers (metrics/extended.json), the holdout chooser's regret there,
  and the default run's clean RAUC-ALL of label-free AUM, NCIP and Entropy (metrics/clean.json).
- ``default`` (docs/results.md): the committed default run per subject (metrics/accuracy.json,
  clean.json, adversarial.json) and its stage-seconds (metrics/cost.json).
- ``extended`` (docs/results.md): the extended study's answers with every pre-registered
  sensitivity analysis and the chooser's regret at each holdout size (metrics/extended.json).
- ``lm`` (docs/study.md): the language-model study (metrics/lm/tiny-gpt2-results.json).
- ``epochs`` (docs/study.md): the longer-training study's table and its selection control
  (metrics/epochs.md, which the report stage renders from the experiment's metrics).
- ``cost`` (docs/performance.md): the committed default run's seconds per stage, as each stage
  measured itself (metrics/cost.json).
"""

from __future__ import annotations

import re
from pathlib import Path

import typer

app = typer.Typer(add_completion=False)
ROOT = Path(__file__).resolve().parents[1]


def render_tables(raw_root: Path = ROOT / "data" / "raw") -> str:
    from ncip.study.datasets import uci

    lines = [
        "| data set | source | package: object | rows | features | classes | test inputs |",
        "|---|---|---|---:|---:|---:|---:|",
    ]
    for name, t in uci.TABLES.items():
        raw = uci.load_table(name, raw_root)
        rows = len(raw.train.y) + len(raw.test.y)
        lines.append(
            f"| `{name}` | {t.source} | {t.deb}: {t.obj or t.rda} | {rows:,} | "
            f"{raw.train.x.shape[-1]} | {len(raw.classes)} | {len(raw.test.y):,} |"
        )
    return "\n".join(lines)


VERDICT_WORDS = {  # ncip.study.statistics.re_verdicts' verdicts, said of the first score
    "better": "{a} ranks better",
    "worse": "{a} ranks worse",
    "better (within the margin)": "{a} ranks better, by less than the 0.01 margin",
    "worse (within the margin)": "{a} ranks worse, by less than the 0.01 margin",
    "equivalent": "equivalent within ±0.01",
    "inconclusive": "inconclusive (neither a difference nor equivalence within ±0.01 shown)",
    "too few": "no verdict (too few data sets)",
}
NAMES = {"ncip": "NCIP", "entropy": "Entropy", "ensemble-entropy": "Ensemble entropy"}


def render_findings(metrics: Path = ROOT / "metrics") -> str:
    import json

    from ncip.study.data import dataset_source

    ext = json.loads((metrics / "extended.json").read_text())
    clean = json.loads((metrics / "clean.json").read_text())["rauc_all"]
    answers = ext.get("primary")
    if not isinstance(answers, list):  # an earlier run's record, from before the two questions
        return (
            "The pre-registered run has not landed: `metrics/extended.json` holds the earlier "
            "13-data-set run, read by the median rule (docs/study.md)."
        )
    sets = sorted({d for a in answers for d in a.get("by_dataset", {})})
    sources = {dataset_source(d) for d in sets}
    parts = [
        f"Over {len(sets)} data sets from {len(sources)} sources (`make extended`, one run each, "
        "the questions and the estimator fixed before the run in "
        "[docs/preregistration.md](docs/preregistration.md); clean RAUC-ALL, random-effects "
        "estimate with its 95% interval, Holm over the two questions):"
    ]
    for a in answers:
        first = NAMES.get(a["method"], a["method"])
        q = f"{first} − {NAMES.get(a['against'], a['against'])}"
        said = VERDICT_WORDS.get(a["verdict"], a["verdict"]).format(a=first)
        if a["verdict"] == "too few":
            parts.append(f"- {q}: {said}.")
            continue
        parts.append(
            f"- {q}: {a['estimate']:+.4f} [{a['low']:+.4f}, {a['high']:+.4f}], prediction "
            f"interval for a new data set [{a['pred_low']:+.4f}, {a['pred_high']:+.4f}]: "
            f"**{said}**."
        )
    at500 = next((c for c in ext.get("chooser", []) if c["size"] == 500), None)
    if at500:
        parts.append(
            f"- Choosing the score on a labelled holdout of 500 inputs (`ncip rank --holdout`): "
            f"median regret {at500['regret']['median']:.4f} over {at500['datasets']} data sets, "
            f"against {at500['regret_ncip']['median']:.4f} for always NCIP and "
            f"{at500['regret_entropy']['median']:.4f} for always Entropy."
        )
    subjects = sorted(clean["ncip"])
    cells = "; ".join(
        f"{s}: AUM {clean['aum'][s]:.3f}, NCIP {clean['ncip'][s]:.3f}, Entropy "
        f"{clean['entropy'][s]:.3f}"
        for s in subjects
        if s in clean.get("aum", {})
    )
    if cells:
        parts.append(f"- The default run (`make repro`), clean RAUC-ALL: {cells}.")
    return "\n".join(parts)


def _answer(a: dict) -> str:
    return (
        f"{a['estimate']:+.4f} [{a['low']:+.4f}, {a['high']:+.4f}], prediction interval "
        f"[{a['pred_low']:+.4f}, {a['pred_high']:+.4f}], tau {a['tau']:.4f}"
    )


def render_extended(metrics: Path = ROOT / "metrics") -> str:
    import json

    ext = json.loads((metrics / "extended.json").read_text())
    answers = ext.get("primary")
    if not isinstance(answers, list):
        return "The pre-registered extended run has not landed (`make extended`)."
    lines = [
        "| question | data sets | random effects [95%], prediction interval | Holm p | verdict "
        "| one unit per source | terminal-phase subjects | median rule (sensitivity) |",
        "|---|---:|---|---:|---|---|---|---|",
    ]
    for a in answers:
        q = f"{NAMES.get(a['method'], a['method'])} − {NAMES.get(a['against'], a['against'])}"
        src, term, med = a.get("by_source", {}), a.get("terminal", {}), a.get("median_rule", {})
        lines.append(
            f"| {q} | {a['datasets']} | {_answer(a)} | {a['p_holm']:.3f} | {a['verdict']} | "
            + (f"{_answer(src)} ({src['datasets']} sources)" if "estimate" in src else "n/a")
            + " | "
            + (f"{_answer(term)} ({term['datasets']} data sets)" if "estimate" in term else "n/a")
            + " | "
            + (
                f"median {med['median']:+.4f} [{med['low']:+.4f}, {med['high']:+.4f}]: "
                f"{med['verdict']}"
                if "median" in med
                else "n/a"
            )
            + " |"
        )
    lines += [
        "",
        "The holdout chooser (`ncip rank --holdout`) against always NCIP and always Entropy: "
        "median regret over data sets with its distribution-free interval, per holdout size "
        "(20 draws per subject; a data set counts where its test split leaves at least the "
        "holdout and as many again; `fallback`: the share of draws with fewer than 20 holdout "
        "faults, where the chooser keeps the default).",
        "",
        "| holdout | data sets | fallback | chooser | always NCIP | always Entropy |",
        "|---:|---:|---:|---|---|---|",
    ]
    for c in ext.get("chooser", []):
        cell = [
            f"{r['median']:.4f} [{r['low']:.4f}, {r['high']:.4f}]"
            for r in (c["regret"], c["regret_ncip"], c["regret_entropy"])
        ]
        lines.append(
            f"| {c['size']} | {c['datasets']} | {c['fallback']:.0%} | " + " | ".join(cell) + " |"
        )
    return "\n".join(lines)


def _stage_seconds(path: Path) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    """A cost.json's seconds per stage (summed over its items), and the items' own."""
    import json

    stages = json.loads(path.read_text())["stages"]
    return {k: sum(v.values()) for k, v in stages.items()}, stages


def render_default(metrics: Path = ROOT / "metrics") -> str:
    import json

    from ncip.study.evaluation import display
    from ncip.study.scores.registry import list_methods

    clean = json.loads((metrics / "clean.json").read_text())["rauc_all"]
    adv = json.loads((metrics / "adversarial.json").read_text())["rauc_all"]
    acc = json.loads((metrics / "accuracy.json").read_text())["test"]
    per_stage, _ = _stage_seconds(metrics / "cost.json")

    def best(table: dict, subject: str) -> str:
        have = [m for m in list_methods("baseline") if subject in table.get(m, {})]
        m = max(have, key=lambda m: table[m][subject])
        return f"{table[m][subject]:.3f} ({display(m)})"

    lines = [
        "| subject | test accuracy | NCIP | best of the paper's baselines | label-free AUM | "
        "Entropy | adversarial: NCIP | best baseline |",
        "|---|---:|---:|---|---:|---:|---:|---|",
    ]
    for s in sorted(clean["ncip"]):
        lines.append(
            f"| {s} | {acc[s]:.4f} | {clean['ncip'][s]:.3f} | {best(clean, s)} | "
            f"{clean['aum'][s]:.3f} | {clean['entropy'][s]:.3f} | {adv['ncip'][s]:.3f} | "
            f"{best(adv, s)} |"
        )
    total = sum(per_stage.values())
    lines += [
        "",
        "Clean and adversarial RAUC-ALL, mean over the training runs (metrics/clean.json, "
        f"adversarial.json). Stage-seconds (metrics/cost.json): {total / 60:.1f} min in all; "
        + ", ".join(f"{k} {v / 60:.1f}" for k, v in per_stage.items() if v >= 30)
        + " (minutes).",
    ]
    return "\n".join(lines)


def render_support(metrics: Path = ROOT / "metrics") -> str:
    """What the default run's paired intervals support, per subject, and its RQ3 verdict and
    ties, from metrics/paired.csv and metrics/report.md."""
    import pandas as pd

    from ncip.study.evaluation import baselines, display

    paired = pd.read_csv(metrics / "paired.csv", dtype={"budget": str})
    report = (metrics / "report.md").read_text()
    base = baselines()
    lines = []
    for split, budget, label in (
        ("test", "all", "RAUC-ALL, clean data"),
        ("test", "500", "RAUC-500, clean data"),
        ("adv", "all", "Adversarial data (RAUC-ALL)"),
    ):
        part = paired[(paired["split"] == split) & (paired["budget"] == budget)]
        said = []
        for subject, g in part.groupby("subject", sort=True):
            v = g.set_index("method")
            have = [m for m in base if m in v.index]

            def named(verdict: str, methods: list[str], v=v) -> str:
                out = [display(m) for m in methods if v.loc[m, "verdict"] == verdict]
                return ", ".join(out) or "none"

            near = min(have, key=lambda m, v=v: v.loc[m, "diff"])
            r = v.loc[near]
            others = [m for m in v.index if m not in base]
            said.append(
                f"{subject}: better than {sum(v.loc[m, 'verdict'] == 'win' for m in have)} of "
                f"{len(have)} baselines, tied with {named('tie', have)}, worse than "
                f"{named('loss', have)} (smallest difference: {display(near)}, {r['diff']:+.3f} "
                f"[{r['lo']:+.3f}, {r['hi']:+.3f}]); of its ablations, controls and the "
                f"checkpoint scores, better than NCIP: {named('loss', others)}"
            )
        lines.append(f"- **{label}**, NCIP minus each method: " + "; ".join(said) + ".")
    rq3 = next((ln for ln in report.splitlines() if ln.startswith("RQ3 verdict:")), None)
    if rq3:
        lines.append(f"- **Retraining (RQ3)**, run 0's final models: {rq3[len('RQ3 verdict: ') :]}")
    lines += [
        "",
        "Tied scores on the clean test sets (share of the inputs whose score another input "
        'shares, and the largest tied block; the report\'s "Tied scores"):',
        "",
        _table_after(report, "## Tied scores"),
    ]
    return "\n".join(lines)


def render_cost(metrics: Path = ROOT / "metrics") -> str:
    per_stage, stages = _stage_seconds(metrics / "cost.json")
    lines = ["| stage | items | seconds |", "|---|---:|---:|"]
    for k, v in stages.items():
        lines.append(f"| {k} | {len(v)} | {per_stage[k]:,.0f} |")
    total = sum(per_stage.values())
    lines.append(f"| **total** | | **{total:,.0f}** ({total / 60:.1f} min) |")
    return "\n".join(lines)


def _table_after(md: str, heading: str) -> str:
    """The first Markdown table under ``heading`` in a report."""
    rest = md[md.index(heading) :].splitlines()
    start = next(i for i, ln in enumerate(rest) if ln.startswith("|"))
    end = next((i for i in range(start, len(rest)) if not rest[i].startswith("|")), len(rest))
    return "\n".join(rest[start:end])


def _selection_control(md: str, source: str) -> str:
    """An experiment's selection-control table from its metrics file, with its caption."""
    return (
        "Selection control, Algorithm 1's checkpoints minus the last K and K random pool "
        f"checkpoints (RAUC-ALL, paired intervals; `{source}`):\n\n"
        + _table_after(md, "### Selection control")
    )


def render_epochs(metrics: Path = ROOT / "metrics") -> str:
    md = (metrics / "epochs.md").read_text()
    if "### Longer training" not in md:
        return "Not run under the current rules yet: `make epochs` writes it."
    return (
        md.splitlines()[0]
        + "\n\n"
        + _table_after(md, "### Longer training")
        + "\n\n"
        + _selection_control(md, "metrics/epochs.md")
    )


def render_text(metrics: Path = ROOT / "metrics") -> str:
    import pandas as pd

    from ncip.study.evaluation import display
    from ncip.study.scores.registry import list_methods

    md = (metrics / "text.md").read_text()
    paired_csv, per_csv = metrics / "text" / "paired.csv", metrics / "text" / "per_ordering.csv"
    if not paired_csv.is_file() or not per_csv.is_file():
        return "Not run under the current rules yet: `make text` writes it."
    per = pd.read_csv(per_csv)
    per = per[(per["split"] == "test") & (per["repeat"] == 0)]
    mean = per.groupby(["subject", "method"])["rauc_all"].mean()
    paired = pd.read_csv(paired_csv, dtype={"budget": str})
    paired = paired[(paired["split"] == "test") & (paired["budget"] == "all")]
    pv = paired.set_index(["subject", "method"])
    subjects = list(dict.fromkeys(per["subject"]))
    base = [m for m in list_methods("baseline") if m in set(per["method"])]

    def vs(s: str, m: str) -> str:
        r = pv.loc[(s, m)]
        mark = f" **{r['verdict']}**" if r["verdict"] != "tie" else ""
        return f"{r['diff']:+.3f} [{r['lo']:+.3f}, {r['hi']:+.3f}]{mark}"

    lines = [
        md.splitlines()[0],
        "",
        "| subject | NCIP | best baseline | Entropy | Dropout | NCIP − best baseline "
        "| NCIP − Entropy | NCIP − Dropout |",
        "|---|---:|---|---:|---:|---|---|---|",
    ]
    counts = {"win": 0, "tie": 0, "loss": 0}
    for s in subjects:
        top = max(base, key=lambda m: mean[(s, m)])
        lines.append(
            f"| {s} | {mean[(s, 'ncip')]:.3f} | {mean[(s, top)]:.3f} ({display(top)}) "
            f"| {mean[(s, 'entropy')]:.3f} | {mean[(s, 'dropout')]:.3f} | {vs(s, top)} "
            f"| {vs(s, 'entropy')} | {vs(s, 'dropout')} |"
        )
        for m in base:
            counts[pv.loc[(s, m), "verdict"]] += 1
    lines += [
        "",
        "Clean RAUC-ALL, mean over the runs; NCIP minus a baseline with its 95% paired interval "
        "(a **win** or **loss** needs the bootstrap and the run-level t-interval both to "
        "exclude 0; `metrics/text/paired.csv`). Against the paper's baselines, over "
        f"{len(subjects)} subjects and {len(base)} baselines: {counts['win']} wins, "
        f"{counts['tie']} ties, {counts['loss']} losses. Training accuracy and σ_cos "
        "(`metrics/text.md`):",
        "",
        _table_after(md, "### Training: accuracy and sigma_cos"),
        "",
        _selection_control(md, "metrics/text.md"),
    ]
    if (metrics / "text" / "cost.json").is_file():
        lines += ["", _text_cost(metrics / "text" / "cost.json")]
    return "\n".join(lines)


def _text_cost(path: Path) -> str:
    """Where the text study's stage time went, in minutes, with the Transformers' share."""
    from ncip.study.subjects import parse_subject

    per_stage, stages = _stage_seconds(path)
    total = sum(per_stage.values())
    parts = []
    for name in sorted(per_stage, key=lambda k: -per_stage[k]):
        if per_stage[name] < 60:
            continue
        tf = sum(
            t
            for k, t in stages[name].items()
            if parse_subject(k.split("/")[0]).model == "transformer"
        )
        parts.append(f"{name} {per_stage[name] / 60:.1f} (Transformers {tf / 60:.1f})")
    return (
        f"Where its stages' time went (`metrics/text/cost.json`, minutes): {total / 60:.1f} in "
        f"all stages that record it; " + ", ".join(parts) + "."
    )


def render_sweep(metrics: Path = ROOT / "metrics") -> str:
    md = (metrics / "sensitivity.md").read_text()
    out = []
    for heading in (
        "### RAUC-ALL against alpha",
        "### fault types at a 5% budget against alpha",
        "### RAUC-ALL against k",
        "### fault types at a 5% budget against k",
    ):
        out += [f"{heading[4:]} (`metrics/sensitivity.md`):", "", _table_after(md, heading), ""]
    return "\n".join(out[:-1])


def render_lm(metrics: Path = ROOT / "metrics") -> str:
    import json

    from ncip.study.lm.evaluation import NAMES as LM_NAMES
    from ncip.study.lm.models import PRIMARY_RULE

    path = metrics / "lm" / "tiny-gpt2-results.json"
    if not path.is_file():
        return "Not run under the current rules yet: `make lm` writes it."
    res = json.loads(path.read_text())
    r = res["rules"][PRIMARY_RULE]
    m, vr = r["mean"], r["vs_random"]
    paired = {p["method"]: p for p in r["paired"] if p["budget"] == "all"}

    def against_random(k: str) -> str:
        v = vr[k]
        side = "above" if v["t_lo"] > 0 else "below" if v["t_hi"] < 0 else "level with"
        return (
            f"{LM_NAMES[k]} {m[k + ':all']:.3f} ({side} random order: {v['diff']:+.4f}, "
            f"[{v['t_lo']:+.4f}, {v['t_hi']:+.4f}])"
        )

    base = [k for k in LM_NAMES if not k.startswith("ncip")]
    prr = res.get("prr", {})
    rep = res.get("repetition", {})
    lines = [
        "- " + (metrics / "lm.md").read_text().splitlines()[0],
        f"- Failure = BLEU-2 at or below the seed's median (failure rate "
        f"{m['failure_rate']:.3f}), RAUC-ALL, mean over {len(res['runs'])} seeds, t-interval "
        f"over seeds; random order {m['random:all']:.3f}: " + against_random("ncip") + ".",
        "- The token-level confidence scores: " + "; ".join(against_random(k) for k in base) + ".",
        "- Selection: NCIP minus its controls, "
        + "; ".join(
            f"{LM_NAMES[c]} {paired[c]['diff']:+.4f} ({paired[c]['verdict']})"
            for c in ("ncip_lastk", "ncip_random")
        )
        + "; the controls themselves: "
        + "; ".join(against_random(c) for c in ("ncip_lastk", "ncip_random"))
        + "."
        + (
            ""
            if vr["ncip"]["t_lo"] > 0
            else " NCIP itself is not above random order, so a win over a control is no "
            "evidence that the selection finds failures."
        ),
    ]
    if prr:
        lines.append(
            "- Prediction-rejection ratio against the continuous BLEU-2 (LM-Polygraph's "
            "measure: 0 random, 1 oracle): "
            + "; ".join(
                f"{LM_NAMES[k]} {v['mean']:+.3f} [{v['t_lo']:+.3f}, {v['t_hi']:+.3f}]"
                for k, v in prr.items()
            )
            + "."
        )
    if rep:
        rho = [(x["rho_entropy"], x["rho_bleu2"]) for x in rep["per_run"]]
        lines.append(
            "- Are the confident continuations the repetitive ones? Spearman's rho of "
            "distinct-2 with the token entropy and with BLEU-2, per seed: "
            + ", ".join(f"({a:+.2f}, {b:+.2f})" for a, b in rho)
            + (
                ": yes in every seed (p < 0.05)."
                if rep["holds"]
                else ": no: distinct-2 does not rise with both (p < 0.05) in every seed, so the "
                "explanation that confident continuations fail because they repeat themselves is "
                "not supported"
                + (
                    " (the more repetitive continuations are the less confident ones)."
                    if all(a < 0 for a, _ in rho)
                    else "."
                )
            )
        )
    return "\n".join(lines)


RENDERERS = {
    "tables": ("docs/datasets.md", render_tables),
    "findings": ("README.md", render_findings),
    "default": ("docs/results.md", render_default),
    "support": ("docs/results.md", render_support),
    "extended": ("docs/results.md", render_extended),
    "lm": ("docs/study.md", render_lm),
    "cost": ("docs/performance.md", render_cost),
    "epochs": ("docs/study.md", render_epochs),
    "text": ("docs/study.md", render_text),
    "sweep": ("docs/study.md", render_sweep),
}


def replace_block(text: str, name: str, body: str) -> str:
    pattern = re.compile(rf"(<!-- render:{name} -->\n)(?:.*?\n)?(<!-- /render:{name} -->)", re.S)
    if not pattern.search(text):
        raise SystemExit(f"error: no <!-- render:{name} --> block to fill")
    return pattern.sub(lambda m: m.group(1) + body + "\n" + m.group(2), text)


@app.command()
def main(
    check: bool = typer.Option(False, help="exit 1 where a page differs; write nothing"),
    only: str | None = typer.Option(None, help="one block: " + ", ".join(RENDERERS)),
):
    stale = []
    for name, (page, render) in RENDERERS.items():
        if only and name != only:
            continue
        path = ROOT / page
        text = path.read_text()
        new = replace_block(text, name, render())
        if new != text:
            stale.append(page)
            if not check:
                path.write_text(new)
    if check and stale:
        raise SystemExit(
            f"error: {', '.join(stale)} differ from what scripts/render_docs.py renders"
        )


if __name__ == "__main__":
    app()
