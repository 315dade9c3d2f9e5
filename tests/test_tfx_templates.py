"""TFX 1.21's taxi and penguin templates run locally through `generic-trainer tfx-pipeline run`,
as TFX's own template e2e tests run them: `tfx template copy` (done by tests/tfx_templates.py from
the wheel), `local_runner.py` run unedited from the copied folder as copied (ExampleGen only; for
penguin also StatisticsGen, not run here, and SchemaGen), then again after the tutorial's steps
(every `# components.append(` of `pipeline/pipeline.py` uncommented, TFX's `_addAllComponents`):
Transform, Trainer (the templates' own step counts), the blessed-model resolver, Evaluator and
Pusher. The pushed model is loaded as TF Serving would and its `serving_default` called."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_tfx_pipeline_files import _ok, _one, _served, _tfx_pipeline
from test_tfx_real_modules import tfx_root  # noqa: F401 - the wheel fixture
from tfx_templates import add_all_components, copy_template

pytestmark = [pytest.mark.slow, pytest.mark.e2e]


def _run_as_copied(project: Path, home: Path, name: str) -> tuple[Path, str]:
    """Runs the copied template as copied; returns its pipeline root and the log."""
    log = _ok(_tfx_pipeline("run", project / "local_runner.py", home, project))
    root = project / "tfx_pipeline_output" / f"my_{name}"
    [examples] = _one(root, "*/generic-import-examples/examples")
    assert {p.name for p in examples.iterdir()} >= {"Split-train", "Split-eval"}
    assert "generic-trainer" not in {p.name for p in examples.parent.parent.iterdir()}
    return root, log


def _run_all_components(project: Path, home: Path, root: Path) -> dict:
    """Runs the template again with the tutorial's steps; returns the served model's outputs."""
    add_all_components(project)
    log = _ok(_tfx_pipeline("run", project / "local_runner.py", home, project))
    assert "no blessed model recorded" in log  # the resolver's first run: no baseline
    [evaluation] = _one(root, "*/generic-evaluator/metrics")
    metrics = json.loads(evaluation.read_text())
    assert metrics["baseline_metrics"] is None
    [blessing] = _one(root, "*/generic-evaluator/blessing")
    assert (blessing / "BLESSED").exists(), metrics
    serving = root / "serving_model"
    versions = [p for p in serving.iterdir() if p.name.isdigit()]
    assert len(versions) == 1 and (versions[0] / "saved_model.pb").is_file(), serving
    examples = _one(root, "*/generic-import-examples/examples")[-1]
    return _served(serving, examples)


@pytest.mark.tfx_files
def test_taxi_template_runs_as_copied_then_with_all_components(tfx_root, tmp_path):  # noqa: F811
    project = tmp_path / "my_taxi"
    copy_template(tfx_root, "taxi", project)
    root, _ = _run_as_copied(project, tmp_path / "home", "taxi")
    outputs = _run_all_components(project, tmp_path / "home", root)
    assert list(outputs.values()) == [[8, 1]], outputs


def test_penguin_template_runs_as_copied_then_with_all_components(tfx_root, tmp_path):  # noqa: F811
    project = tmp_path / "my_penguin"
    copy_template(tfx_root, "penguin", project)
    root, log = _run_as_copied(project, tmp_path / "home", "penguin")
    assert "not run: StatisticsGen" in log
    [schema] = _one(root, "*/generic-import-examples/output_schema/schema.pbtxt")
    assert 'name: "species"' in schema.read_text()
    outputs = _run_all_components(project, tmp_path / "home", root)
    assert list(outputs.values()) == [[8, 3]], outputs
