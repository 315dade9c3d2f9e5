"""The outputs of evaluate, each declared once: flag, KFP component output, request check
(judge_options.py declares its inputs and the verb)."""

from __future__ import annotations

from generic_trainer.errors import UserInputError
from generic_trainer.intake.options import Group, Option, output, output_value, value
from generic_trainer.intake.request import output_file


def records_dir(raw: object, flag: str, value: object) -> str | None:
    """The records dir as a local path (gs:// under the gcs root); None when unset."""
    from generic_trainer.artifacts import storage

    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise UserInputError(flag, f"expected a directory or gs:// URI, got {value!r}")
    return storage.local_path(value, getattr(raw, "gcs_root", "/gcs"))


EVALUATE_OUTPUTS = Group(
    "outputs",
    (
        Option(
            "evaluation_dir",
            help="TFMA's output, as TFX's Evaluator writes it (tfma.load_eval_result reads it)",
            metavar="DIR",
            output="dir",
            param=output(
                "Artifact",
                "TFMA's output as TFX's Evaluator writes it (tfma.load_eval_result reads it).",
                name="evaluation",
            ),
        ),
        Option(
            "blessing_dir",
            help="where BLESSED or NOT_BLESSED goes (the reasons inside)",
            metavar="DIR",
            output="dir",
            published=True,
            param=output(
                "Artifact",
                "TFX-style blessing dir: BLESSED or NOT_BLESSED (reasons inside); metadata blessed "
                "1|0.",
                name="blessing",
            ),
        ),
        Option(
            "metrics_file",
            check=output_file,
            help="write the whole evaluation (overall, slices, baseline, thresholds) here as JSON",
            metavar="FILE",
            output="file",
            param=output(
                "Metrics",
                (
                    "Overall metrics as scalars (baseline_<name> for the baseline); the file holds "
                    "everything\n"
                    "as JSON (slices, threshold checks), derived from TFMA's result."
                ),
                name="metrics",
            ),
        ),
        Option(
            "report_file",
            check=output_file,
            help="write an HTML report here",
            metavar="FILE",
            output="file",
            param=output(
                "HTML",
                "HTML report: verdict, comparison with the baseline, slices, confusion matrix.",
                name="report",
            ),
        ),
        Option(
            "records_dir",
            check=records_dir,
            help="when BLESSED, record the model here for a later run's resolve "
            "(TFX's LatestBlessedModelStrategy); default: no record",
            metavar="DIR",
            param=value(
                str,
                "When BLESSED, record the model here for a later run's resolver (the tfx-pipeline "
                "verb\nsets <pipeline_root>/generic-trainer-records/<name>).",
                None,
            ),
        ),
        # for dsl.If: TFX's Cond(evaluator.outputs['blessing'].future()[0]
        # .custom_property('blessed') == 1)
        Option(
            "blessed",
            cli=False,
            param=output_value(
                bool, "True when the model is BLESSED (the blessing's blessed 1), for dsl.If."
            ),
        ),
    ),
)
