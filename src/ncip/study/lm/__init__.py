"""The language-model study (`make lm`, the paper's Fig. 4b at CPU scale): a small GPT-2
pretrained once on WordNet glosses and fortune quotes, fine-tuned on the CPython documentation
with a real Hugging Face Trainer (a checkpoint per epoch, three seeds), its held-out prompts
ranked by NCIP for sequences (:mod:`ncip.core.sequences`) and by the token-level confidence
scores, a failure being a continuation whose BLEU-2 falls at or below a threshold fixed before
any ranking.

- :mod:`ncip.study.lm.models`: the model configs and the study's fixed choices (one home);
- :mod:`ncip.study.lm.corpus`: the texts, the tokenizer and the prompts (stage lm-data);
- :mod:`ncip.study.lm.training`: pretraining (lm-pretrain) and fine-tuning (lm-finetune);
- :mod:`ncip.study.lm.scoring`: every method's score per prompt, with the selection controls
  (lm-score);
- :mod:`ncip.study.lm.evaluation`: RAUC per method and seed, paired intervals, the tables
  (lm-evaluate).
"""
