"""The language-model study's results (stage lm-evaluate): per failure rule, each method's
RAUC-100/500/ALL over the fine-tuning seeds beside random order, and NCIP minus each other
method with two intervals.

- **Paired bootstrap** (:func:`ncip.study.statistics.paired_bootstrap`, 1,000 resamples):
  the seeds, then each seed's prompts, one prompt resample shared by the methods;
- **t-interval over the seeds** of the per-seed differences (with three seeds, 2 degrees of
  freedom: wide). A difference counts as a win or a loss only where both intervals exclude 0
  (the rule of :func:`ncip.study.statistics.paired_bootstrap` for fewer than 5 runs).

A failure is a continuation whose BLEU-2 is at or below the threshold of the rule (the seed's
test-prompt median, the primary rule; a fixed 0.1, the sensitivity row): each seed's final
model writes its own continuations, so each seed has its own failures and failure rate. Random
order's expected RAUC (:func:`ncip.core.metrics.expected_random_rauc`) is given beside the
methods: with a failure rate f, RAUC-ALL of a random order is about 1 / (2 - f).

Two further readings of the same per-prompt data (issue 49):

- **Prediction-rejection ratio** (PRR, the measure of LM-Polygraph's benchmark, against the
  continuous BLEU-2 rather than a split): reject prompts in a method's order (most suspicious
  first) and follow the mean BLEU-2 of those kept; PRR is the area between that curve and
  random rejection's (a flat line at the mean), over the area between the oracle's (lowest
  BLEU-2 first) and random's, every rejection rate from 0 to 1 weighted alike: 1 is the
  oracle, 0 random order, below 0 worse than random. :func:`prr`.
- **Repetition**: distinct-2 of each continuation (distinct word bigrams over its bigrams,
  words as BLEU-2 reads them) tests the explanation that confident continuations fail because
  they are repetitive: it holds where, in every seed, distinct-2 rises with the final model's
  token entropy and with BLEU-2 (Spearman, p < 0.05). :func:`repetition`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ncip.core.metrics import expected_random_rauc, order_from_scores, rauc
from ncip.core.sequences import _words, failures
from ncip.study.lm.models import CONTROLS, FAILURE_RULES, PRIMARY_RULE
from ncip.study.statistics import paired_bootstrap, t_interval

BUDGETS = (100, 500, None)
NAMES = {
    "ncip": "NCIP",
    "ncip_lastk": "NCIP, last K",
    "ncip_random": "NCIP, random K",
    "entropy": "Entropy",
    "msp": "MSP",
    "deepgini": "DeepGini",
    "margin": "Margin",
    "logppl": "Log-perplexity",
}
BASELINES = ("entropy", "msp", "deepgini", "margin", "logppl")
RESAMPLES = 1000


def _rule_name(rule) -> str:
    return "median" if rule == "median" else f"{float(rule):g}"


def _budget(n) -> str:
    return "all" if n is None else str(n)


def distinct2(texts) -> np.ndarray:
    """Each text's distinct word bigrams over its bigrams (words as BLEU-2 reads them); NaN
    for a text of fewer than two words."""
    out = np.full(len(texts), np.nan)
    for i, t in enumerate(texts):
        w = _words(t)
        pairs = list(zip(w, w[1:], strict=False))
        if pairs:
            out[i] = len(set(pairs)) / len(pairs)
    return out


def prr(scores: np.ndarray, quality: np.ndarray, seed: int = 0) -> float:
    """The prediction-rejection ratio of an order (see the module docstring): rejection in
    ``order_from_scores(scores, seed)``, quality higher = better. NaN when every quality is
    equal (no oracle gain to compare against)."""
    q = np.asarray(quality, dtype=np.float64)
    n = len(q)

    def area(order: np.ndarray) -> float:
        kept = q[order][::-1]  # the last rejected first: kept[:m] is what remains of m
        return float(np.mean(np.cumsum(kept) / np.arange(1, n + 1)))

    rnd = float(q.mean())
    oracle = area(np.argsort(q, kind="stable"))
    if not oracle - rnd > 1e-12:
        return float("nan")
    return (area(order_from_scores(scores, seed)) - rnd) / (oracle - rnd)


def _spearman(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    from scipy.stats import spearmanr

    ok = np.isfinite(a) & np.isfinite(b)
    r = spearmanr(a[ok], b[ok])
    return float(r.statistic), float(r.pvalue)


def repetition(tables: dict[int, pd.DataFrame]) -> dict:
    """Per seed: Spearman's rho (and p) of distinct-2 with the final model's mean token entropy
    and with BLEU-2, mean distinct-2 of the failures and of the rest (primary rule); and
    whether the repetition explanation holds (module docstring)."""
    per_run = []
    for run, t in sorted(tables.items()):
        d2 = distinct2(t["continuation"].tolist())
        fail, _ = failures(t["bleu2"].to_numpy(), PRIMARY_RULE)
        r_ent, p_ent = _spearman(d2, t["entropy"].to_numpy())
        r_bleu, p_bleu = _spearman(d2, t["bleu2"].to_numpy())
        per_run.append(
            {
                "run": run,
                "rho_entropy": r_ent,
                "p_entropy": p_ent,
                "rho_bleu2": r_bleu,
                "p_bleu2": p_bleu,
                "distinct2_failures": float(np.nanmean(d2[fail])),
                "distinct2_rest": float(np.nanmean(d2[~fail])),
            }
        )
    holds = all(
        r["rho_entropy"] > 0
        and r["p_entropy"] < 0.05
        and r["rho_bleu2"] > 0
        and r["p_bleu2"] < 0.05
        for r in per_run
    )
    return {"per_run": per_run, "holds": holds}


def _prr_table(tables: dict[int, pd.DataFrame], seed: int) -> dict:
    """PRR against BLEU-2 per method and seed, the mean with its t-interval over seeds, and
    NCIP minus each method (t over seeds)."""
    runs = sorted(tables)
    per = {}
    for m in NAMES:
        per[m] = [prr(tables[r][m].to_numpy(), tables[r]["bleu2"].to_numpy(), seed) for r in runs]
    out = {}
    for m, v in per.items():
        lo, hi = t_interval(np.asarray(v))
        d = np.asarray(per["ncip"]) - np.asarray(v)
        dlo, dhi = t_interval(d) if m != "ncip" else (float("nan"), float("nan"))
        out[m] = {
            "per_run": v,
            "mean": float(np.mean(v)),
            "t_lo": lo,
            "t_hi": hi,
            "ncip_minus": float(d.mean()) if m != "ncip" else None,
            "diff_t_lo": dlo,
            "diff_t_hi": dhi,
        }
    return out


def prompt_table(tables: dict[int, pd.DataFrame], prompts: pd.DataFrame) -> pd.DataFrame:
    """Every seed's per-prompt data in one table (metrics/lm/<model>-prompts.csv): the prompt,
    its reference, the seed's continuation, BLEU-2, distinct-2, failure under each rule and every
    method's score, so anyone can recompute the tables."""
    ref = prompts.assign(id=prompts["id"].astype(str))[["id", "prompt", "reference"]]
    frames = []
    for run, t in sorted(tables.items()):
        f = t.merge(ref, on="id", how="left", validate="one_to_one")
        f.insert(0, "run", run)
        f["distinct2"] = distinct2(f["continuation"].tolist())
        for rule in FAILURE_RULES:
            f[f"fails_{_rule_name(rule)}"], _ = failures(f["bleu2"].to_numpy(), rule)
        frames.append(f)
    cols = ["run", "id", "prompt", "reference", "continuation", "bleu2", "distinct2"]
    df = pd.concat(frames, ignore_index=True)
    return df[cols + [c for c in df.columns if c not in cols]]


def evaluate(tables: dict[int, pd.DataFrame], seed: int = 0) -> dict:
    """``tables[run]``: lm-score's table of each seed. Returns the metrics (JSON-able)."""
    runs = sorted(tables)
    out: dict = {"runs": runs, "prompts": int(len(tables[runs[0]])), "rules": {}}
    out["prr"] = _prr_table(tables, seed)
    out["repetition"] = repetition(tables)
    for rule in FAILURE_RULES:
        per_run, orders = [], []
        for run in runs:
            t = tables[run]
            fail, threshold = failures(t["bleu2"].to_numpy(), rule)
            n, f = len(fail), int(fail.sum())
            row = {"run": run, "threshold": threshold, "failures": f, "failure_rate": f / n}
            by_method = {}
            for m in NAMES:
                order = order_from_scores(t[m].to_numpy(), seed)
                by_method[m] = (order, fail)
                for b in BUDGETS:
                    row[f"{m}:{_budget(b)}"] = rauc(fail[order], b)
            for b in BUDGETS:
                row[f"random:{_budget(b)}"] = expected_random_rauc(n, f, b)
            per_run.append(row)
            orders.append(by_method)
        df = pd.DataFrame(per_run)
        paired = paired_bootstrap(orders, "ncip", BUDGETS, RESAMPLES, seed)
        rows = []
        for p in paired.itertuples():  # the verdict needs both intervals (3 seeds < 5)
            rows.append(
                {
                    "method": p.method,
                    "budget": p.budget,
                    "diff": p.diff,
                    "boot_lo": p.lo,
                    "boot_hi": p.hi,
                    "t_lo": p.t_lo,
                    "t_hi": p.t_hi,
                    "verdict": p.verdict,
                }
            )
        vs_random = {}
        for m in NAMES:  # a method against the expected random order, per seed
            d = (df[f"{m}:all"] - df["random:all"]).to_numpy()
            lo, hi = t_interval(d)
            vs_random[m] = {"diff": float(d.mean()), "t_lo": lo, "t_hi": hi}
        out["rules"][_rule_name(rule)] = {
            "per_run": df.to_dict(orient="records"),
            "mean": df.drop(columns="run").mean().to_dict(),
            "paired": rows,
            "vs_random": vs_random,
        }
    return out


def metrics_summary(result: dict) -> dict:
    """The DVC metrics (`dvc metrics diff`): mean RAUC-ALL per method and rule, failure rate."""
    out = {}
    for rule, r in result["rules"].items():
        m = r["mean"]
        out[rule] = {"failure_rate": m["failure_rate"], "random": m["random:all"]} | {
            k: m[f"{k}:all"] for k in NAMES
        }
    out["prr"] = {k: v["mean"] for k, v in result["prr"].items()}
    return out


def markdown(result: dict, info: dict, model: str, selections: dict[int, dict]) -> str:
    """The study's tables (metrics/lm/<model>.md, the report's language-model section)."""
    runs = result["runs"]
    L = [
        f"{model}: {info['parameters'] / 1e6:.2f} M parameters, pretrained for "
        f"{info['pretrain_steps']} steps on {info['pretraining_tokens']:,} tokens of WordNet "
        f"glosses and fortune quotes, fine-tuned for {info['epochs']} epochs on "
        f"{info['finetune_paragraphs']} paragraphs ({info['finetune_tokens']:,} tokens) of the "
        f"CPython documentation, {len(runs)} seeds ({', '.join(map(str, runs))}). "
        f"{result['prompts']} test prompts of {info['prompt_tokens']} tokens from "
        f"{info['held_out_pages']} held-out documentation pages; each is continued greedily for "
        f"{info['new_tokens']} tokens by the seed's final checkpoint and scored by BLEU-2 "
        "against the next "
        f"{info['new_tokens']} tokens of the page. NCIP: K = {info['k']} of the last "
        f"alpha = {info['alpha']:g} of the checkpoints, mean over the continuation's tokens.",
        "",
    ]
    for rule, r in result["rules"].items():
        m = r["mean"]
        primary = rule == PRIMARY_RULE
        what = "the seed's median" if rule == "median" else rule
        L += [
            f"#### Failure: BLEU-2 at or below {what}"
            + (" (primary, fixed before any ranking)" if primary else " (sensitivity)"),
            "",
            f"Failure rate {m['failure_rate']:.3f} (mean over seeds; thresholds "
            + ", ".join(f"{x['threshold']:.3f}" for x in r["per_run"])
            + ").",
            "",
            "| method | RAUC-100 | RAUC-500 | RAUC-ALL | method - random, RAUC-ALL [t over seeds] "
            "| NCIP - method, RAUC-ALL [bootstrap] [t over seeds] |",
            "|---|---|---|---|---|---|",
        ]
        paired = {(p["method"], p["budget"]): p for p in r["paired"]}
        for key, name in [*NAMES.items(), ("random", "Random (expected)")]:
            cells = [f"{m[f'{key}:{_budget(b)}']:.3f}" for b in BUDGETS]
            p = paired.get((key, "all"))
            diff = (
                f"{p['diff']:+.4f} [{p['boot_lo']:+.4f}, {p['boot_hi']:+.4f}] "
                f"[{p['t_lo']:+.4f}, {p['t_hi']:+.4f}] {p['verdict']}"
                if p
                else ""
            )
            v = r["vs_random"].get(key)
            rand = f"{v['diff']:+.4f} [{v['t_lo']:+.4f}, {v['t_hi']:+.4f}]" if v else ""
            L.append(f"| {name} | " + " | ".join(cells) + f" | {rand} | {diff} |")
        L.append("")
        L.append(_sentence(r, rule))
        L.append("")
    L += _prr_lines(result["prr"], len(runs))
    L += _repetition_lines(result["repetition"])
    L += _selection_lines(selections)
    return "\n".join(L)


def _prr_lines(table: dict, runs: int) -> list[str]:
    L = [
        "#### Prediction-rejection ratio against BLEU-2 (LM-Polygraph's measure)",
        "",
        "Each order rejects the prompts it ranks first; PRR compares the mean BLEU-2 of what "
        "is kept with random rejection (0) and the oracle's (1), over every rejection rate; "
        f"no failure threshold. Mean over {runs} seeds with the t-interval over seeds.",
        "",
        "| method | PRR [t over seeds] | NCIP - method [t over seeds] |",
        "|---|---|---|",
    ]
    for key, name in NAMES.items():
        v = table[key]
        diff = (
            f"{v['ncip_minus']:+.4f} [{v['diff_t_lo']:+.4f}, {v['diff_t_hi']:+.4f}]"
            if v["ncip_minus"] is not None
            else ""
        )
        L.append(f"| {name} | {v['mean']:+.4f} [{v['t_lo']:+.4f}, {v['t_hi']:+.4f}] | {diff} |")
    best = max(NAMES, key=lambda k: table[k]["mean"])
    above = [NAMES[k] for k in NAMES if table[k]["t_lo"] > 0]
    below = [NAMES[k] for k in NAMES if table[k]["t_hi"] < 0]
    L += [
        "",
        f"Highest PRR: {NAMES[best]} ({table[best]['mean']:+.4f}). Above random rejection "
        f"beyond the interval: {', '.join(above) or 'none'}; below it: "
        f"{', '.join(below) or 'none'}.",
        "",
    ]
    return L


def _repetition_lines(rep: dict) -> list[str]:
    L = [
        "#### Are the confident continuations the repetitive ones?",
        "",
        "Distinct-2 of each continuation (distinct word bigrams over its bigrams) against the "
        "final model's mean token entropy and against BLEU-2 (Spearman), and its mean over the "
        "failures (primary rule) and over the rest:",
        "",
        "| seed | rho(distinct-2, entropy) | rho(distinct-2, BLEU-2) | distinct-2, failures | "
        "distinct-2, rest |",
        "|---|---|---|---|---|",
    ]
    for r in rep["per_run"]:
        L.append(
            f"| {r['run']} | {r['rho_entropy']:+.3f} (p {r['p_entropy']:.2g}) | "
            f"{r['rho_bleu2']:+.3f} (p {r['p_bleu2']:.2g}) | {r['distinct2_failures']:.3f} | "
            f"{r['distinct2_rest']:.3f} |"
        )
    L += [
        "",
        (
            "The explanation holds on these data: in every seed the more repetitive "
            "continuations are the more confident ones and the ones with lower BLEU-2."
            if rep["holds"]
            else "The explanation is not supported on these data: in at least one seed "
            "distinct-2 does not rise with both the model's entropy and BLEU-2 (p < 0.05), "
            "so why the confidence scores rank below random order stays open."
        ),
        "",
    ]
    return L


def _sentence(r: dict, rule: str) -> str:
    m = r["mean"]
    paired = {p["method"]: p for p in r["paired"] if p["budget"] == "all"}
    best = max(BASELINES, key=lambda k: m[f"{k}:all"])
    counts = {v: sum(paired[b]["verdict"] == v for b in BASELINES) for v in ("win", "tie", "loss")}
    controls = ", ".join(
        f"{NAMES[c]} {paired[c]['diff']:+.4f} ({paired[c]['verdict']})" for c in CONTROLS
    )
    vr = r["vs_random"]
    below = [b for b in BASELINES if vr[b]["t_hi"] < 0]
    ncip_vs = vr["ncip"]
    verdict = (
        "better than random order"
        if ncip_vs["t_lo"] > 0
        else "worse than random order"
        if ncip_vs["t_hi"] < 0
        else "not distinguishable from random order"
    )
    return (
        f"NCIP's RAUC-ALL {m['ncip:all']:.3f} against the best confidence score "
        f"({NAMES[best]}, {m[f'{best}:all']:.3f}) and random order ({m['random:all']:.3f}): "
        f"NCIP is {verdict} ({ncip_vs['diff']:+.4f}, t over seeds "
        f"[{ncip_vs['t_lo']:+.4f}, {ncip_vs['t_hi']:+.4f}]), and {len(below)} of the five "
        "token-level baselines are below random order beyond their interval. Against those "
        f"baselines: {counts['win']} wins, {counts['tie']} ties, {counts['loss']} losses (both "
        f"intervals). Algorithm 1 minus the controls: {controls}."
    )


def _selection_lines(selections: dict[int, dict]) -> list[str]:
    L = ["#### Checkpoints selected (sigma_cos of the LM head)", ""]
    for run, s in sorted(selections.items()):
        sig = list(s["sigma_cos"].values())
        L.append(
            f"- seed {run}: sigma_cos {sig[0]:.4f} after epoch 1, {sig[-1]:.4f} at the end "
            f"({'falling' if sig[-1] < sig[0] else 'rising'}); Algorithm 1 chose epochs "
            f"{', '.join(map(str, s['selected_epochs']))}"
        )
    L.append("")
    return L
