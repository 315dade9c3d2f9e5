"""The HTML report: building blocks (table, line chart), reading TensorBoard event files as Keras
and TF1 write them, graceful fallbacks, escaping, and no secrets in a train report."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from generic_trainer.artifacts import report
from generic_trainer.artifacts.results import TrainResult
from generic_trainer.fit.requests import RunFnProgram, TrainRequest
from generic_trainer.trained import train_report


def _write_events(
    run_dir: Path,
    points: dict[str, list[tuple[int, float]]],
    tensor: bool = True,
    extra_values: list | None = None,
) -> None:
    """Event files like Keras' TensorBoard callback (tensor scalars) or TF1 (simple_value) write
    them."""
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter
    from tensorboard.util import tensor_util

    run_dir.mkdir(parents=True, exist_ok=True)
    writer = EventFileWriter(str(run_dir))
    for tag, series in points.items():
        for step, value in series:
            if tensor:
                meta = summary_pb2.SummaryMetadata(
                    plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars")
                )
                val = summary_pb2.Summary.Value(
                    tag=tag, metadata=meta, tensor=tensor_util.make_tensor_proto(value)
                )
            else:
                val = summary_pb2.Summary.Value(tag=tag, simple_value=value)
            writer.add_event(
                event_pb2.Event(step=step, wall_time=1.0, summary=summary_pb2.Summary(value=[val]))
            )
    for val in extra_values or ():
        writer.add_event(
            event_pb2.Event(step=0, wall_time=1.0, summary=summary_pb2.Summary(value=[val]))
        )
    writer.close()


def test_read_scalars_from_keras_and_tf1_runs(tmp_path):
    from tensorboard.compat.proto import summary_pb2
    from tensorboard.util import tensor_util

    _write_events(
        tmp_path / "train", {"epoch_loss": [(0, 0.9), (1, 0.5), (2, 0.3)], "epoch_auc": [(0, 0.6)]}
    )
    histogram = summary_pb2.Summary.Value(
        tag="weights", tensor=tensor_util.make_tensor_proto([1.0, 2.0, 3.0])
    )
    _write_events(
        tmp_path / "validation",
        {"epoch_loss": [(0, 1.0), (1, 0.7), (2, 0.6)]},
        extra_values=[histogram],
    )
    _write_events(tmp_path / "trial_1" / "execution0", {"val_loss": [(5, 0.25)]}, tensor=False)
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "events.out.tfevents.1.host").write_bytes(
        b"\x07garbage that is not a record"
    )
    scalars = report.read_scalars(str(tmp_path))

    def flat(points):
        return [v for point in points for v in point]

    assert flat(scalars["epoch_loss"]["train"]) == pytest.approx([0, 0.9, 1, 0.5, 2, 0.3])
    assert flat(scalars["epoch_loss"]["validation"]) == pytest.approx([0, 1.0, 1, 0.7, 2, 0.6])
    assert list(scalars["val_loss"]) == ["trial_1/execution0"]
    assert flat(scalars["val_loss"]["trial_1/execution0"]) == pytest.approx([5, 0.25])
    assert "weights" not in scalars  # not a scalar
    assert report.read_scalars(str(tmp_path / "absent")) == {}


def test_curves_draw_one_chart_per_tag_loss_first(tmp_path):
    _write_events(
        tmp_path / "train",
        {"epoch_accuracy": [(0, 0.5), (1, 0.8)], "epoch_loss": [(0, 0.9), (1, 0.4)]},
    )
    _write_events(tmp_path / "validation", {"epoch_loss": [(0, 1.0), (1, 0.6)]})
    _write_events(tmp_path / "final", {"loss": [(40, 0.6)]})
    html = report.curves(str(tmp_path))
    titles = re.findall(r'font-weight="bold">([^<]*)</text>', html)
    assert titles == [
        "loss",
        "accuracy",
    ]  # "final" (one point per metric) is left to the metrics table
    loss_svg = html[: html.index("accuracy")]
    assert (
        loss_svg.count("<polyline") == 2
        and ">train</text>" in loss_svg
        and ">validation</text>" in loss_svg
    )
    assert ">epoch</text>" in loss_svg
    empty = report.curves(str(tmp_path / "nothing-here"))
    assert "No curves" in empty and "keras.callbacks.TensorBoard" in empty


def test_line_chart_is_valid_svg_with_points_in_the_plot_area():
    html = report.line_chart(
        "loss <&>",
        {"a": [(0, 1.0), (10, 0.0), (5, float("nan"))], "b": [(3, 0.5)]},
        x_label="step",
        width=400,
        height=200,
    )
    svg = ET.fromstring(re.search(r"<svg.*</svg>", html, re.S).group(0))
    ns = {"s": "http://www.w3.org/2000/svg"}
    polyline = svg.find("s:polyline", ns)
    xs_ys = [tuple(map(float, p.split(","))) for p in polyline.get("points").split()]
    assert len(xs_ys) == 2  # NaN dropped, sorted by x
    assert xs_ys[0][0] < xs_ys[1][0] and xs_ys[0][1] < xs_ys[1][1]  # y=1 is higher up than y=0
    for x, y in xs_ys:
        assert 0 < x < 400 and 0 < y < 200
    assert len(svg.findall("s:circle", ns)) == 3  # b's single point is drawn as a marker
    assert "loss &lt;&amp;&gt;" in html
    assert "nothing logged" in report.line_chart("t", {"a": [(0, float("inf"))]})


def test_long_series_are_thinned():
    points = [(float(i), float(i % 7)) for i in range(5000)]
    html = report.line_chart("t", {"a": points})
    coords = re.search(r'points="([^"]*)"', html).group(1).split()
    assert len(coords) == report.MAX_POINTS
    assert "<circle" not in html


def test_table_escapes_html_and_rounds_numbers_to_four_digits():
    html = report.table(
        [("<script>alert(1)</script>", 0.123456789), ("n", 3), ("cfg", {"a": [1, 2]})],
        header=("name", "value"),
    )
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert '<td class="num">0.1235</td>' in html and '<td class="num">3</td>' in html
    assert "{&quot;a&quot;: [1, 2]}" in html
    assert report.key_value_table({"a": None, "b": 1}).count("<tr>") == 2  # header + b


def test_train_report_has_inputs_strategy_metrics_and_no_secrets(tmp_path):
    run_dir = tmp_path / "run"
    _write_events(run_dir / "train", {"epoch_loss": [(0, 0.9), (1, 0.4)]})
    request = TrainRequest(
        program=RunFnProgram('gs://b/mod"ule.py'),
        examples="/data/<examples>",
        model_dir=str(tmp_path / "m"),
        model_run_dir=str(run_dir),
        checkpoint_dir=str(tmp_path / "ck"),
        report_file=str(tmp_path / "r.html"),
        custom_config={
            "epochs": 3,
            "db_password": "pw-123",
            "nested": {"api_key": "k-456"},
            "secret_keys": ["plain"],
            "plain": "listed-789",
        },
        train_steps=200,
    )
    result = TrainResult(
        is_chief=True,
        model_dir=str(tmp_path / "m"),
        serving_model_dir="/m/Format-Serving",
        metrics={"accuracy": 0.97, "loss": 0.11, "train_loss": 0.2},
        model_info={"signatures": ["serving_default"], "serving_inputs": {"examples": "string"}},
        strategy="MirroredStrategy",
        num_replicas=2,
        train_steps=200,
        devices=("/job:localhost/replica:0/task:0/device:GPU:0", "/device:GPU:1"),
    )
    train_report.write_train_report(request, result)
    html = Path(request.report_file).read_text()
    for secret in ("pw-123", "k-456", "listed-789"):
        assert secret not in html
    assert "/data/&lt;examples&gt;" in html and "gs://b/mod&quot;ule.py" in html
    assert "MirroredStrategy" in html and "device:GPU:1" in html and "serving_default" in html
    assert html.index(">accuracy<") < html.index(
        ">train_loss<"
    )  # eval metrics before train metrics
    assert html.count("<svg") == 1 and "<script" not in html
    assert not list(tmp_path.glob("r.html.tmp-*"))


def test_report_write_failure_does_not_fail_the_run(tmp_path, caplog):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    request = TrainRequest(
        program=RunFnProgram("m.py"),
        examples="e",
        model_dir="m",
        model_run_dir=str(tmp_path / "none"),
        checkpoint_dir="c",
        report_file=str(blocker / "sub" / "report.html"),
    )
    result = TrainResult(
        is_chief=True,
        model_dir="m",
        serving_model_dir="s",
        metrics={},
        model_info={},
        strategy="_DefaultDistributionStrategy",
        num_replicas=1,
        train_steps=None,
    )
    train_report.write_train_report(request, result)
    assert "report: could not write" in caplog.text
