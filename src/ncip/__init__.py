"""ncip: label-free test-input prioritization by neural-collapse instability.

Implements "Test Case Prioritization for DNNs via Neural Collapse Instability" (ISSTA 2026):
select late training checkpoints by the equiangularity of their classifier heads
(:mod:`ncip.core.collapse`), then rank test inputs by how much their predicted distribution moves
across those checkpoints, combined with the final model's margin (:mod:`ncip.study.scores`).
"""

__version__ = "0.1.0"


def __getattr__(name: str):
    # `ncip.rank`, `ncip.rank_sequences`, `ncip.rank_probs` and `ncip.CheckpointWriter` load
    # their modules on first use.
    if name == "rank":
        from ncip.tool.rank import rank

        return rank
    if name == "CheckpointWriter":
        from ncip.tool.writer import CheckpointWriter

        return CheckpointWriter
    if name == "rank_probs":
        from ncip.tool.ranking import rank_probs

        return rank_probs
    if name == "rank_sequences":
        from ncip.tool.sequences import rank_sequences

        return rank_sequences
    if name == "Ranking":
        from ncip.tool.output import Ranking

        return Ranking
    raise AttributeError(f"module 'ncip' has no attribute {name!r}")
