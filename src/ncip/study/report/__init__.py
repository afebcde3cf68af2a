"""The study report: this run's tables beside the paper's, statistics, costs and figures.

One module per part of the report: :mod:`.inputs` reads the other stages' outputs,
:mod:`.sections` renders the page one section per function (in the order of
``sections.SECTIONS``), drawing on :mod:`.common` (subject columns, paper-beside-run tables,
costs), :mod:`.significance` (Table 5, the extended study), :mod:`.paired` (per-subject
intervals), :mod:`.retraining` (RQ3), :mod:`.agreement` (the summary's comparisons with the
paper, ties), :mod:`.primary` (the pre-registered co-primary questions, the forest plot's rows,
the checkpoint scores) and :mod:`.chooser` (the holdout chooser's regret). The report stage
needs only what this package exports.
"""

from ncip.study.report.chooser import chooser_curve, chooser_summary
from ncip.study.report.inputs import ReportInputs, read_inputs, weak_table
from ncip.study.report.primary import forest_rows
from ncip.study.report.retraining import retrain_table
from ncip.study.report.sections import render_report
from ncip.study.report.significance import significance_record

__all__ = [
    "ReportInputs",
    "chooser_curve",
    "chooser_summary",
    "forest_rows",
    "read_inputs",
    "render_report",
    "retrain_table",
    "significance_record",
    "weak_table",
]
