"""TFX's `tfx template copy --model=NAME --pipeline_name=PIPELINE --destination_path=OUT`, done
here as TFX's template_handler does it (read from the tfx wheel, nothing copied into the
repository): the template's files except `e2e_tests/`, private folders and `.pyc` files, with
`from tfx.experimental.templates.NAME.` imports made local and `{{PIPELINE_NAME}}` filled in
(escaped as TFX escapes it), then the template's data at `data/data.csv`.

The taxi data comes from the wheel (`examples/chicago_taxi_pipeline/data/simple/data.csv`, TFX's
source). The penguin data TFX downloads (`penguins_processed.csv`) is not in the wheel and tests run
without the network: it is made as that file was made, from the Palmer penguins table (rows with a
missing value dropped, `species` as the index of its sorted name, the four measures min-max scaled
to [0, 1], under TFX's column names).
"""

from __future__ import annotations

import re
from pathlib import Path

_IMPORT_FROM_PACKAGE = re.compile(r"from tfx\.experimental\.templates\.[^\.]+\.")
_PENGUIN_COLUMNS = {  # TFX's column: the palmerpenguins column
    "culmen_length_mm": "bill_length_mm",
    "culmen_depth_mm": "bill_depth_mm",
    "flipper_length_mm": "flipper_length_mm",
    "body_mass_g": "body_mass_g",
}


def _sanitized(pipeline_name: str) -> str:
    for char in ("\\", "'", '"', "/"):
        pipeline_name = pipeline_name.replace(char, "\\" + char)
    return pipeline_name


def _copy_files(source: Path, out: Path, pipeline_name: str) -> None:
    for file in sorted(source.rglob("*")):
        relative = file.relative_to(source)
        private = any(p.startswith("_") for p in relative.parts[:-1])
        if file.is_dir() or private or relative.parts[0] == "e2e_tests" or file.suffix == ".pyc":
            continue
        text = _IMPORT_FROM_PACKAGE.sub("from ", file.read_text())
        text = text.replace("{{PIPELINE_NAME}}", _sanitized(pipeline_name))
        (out / relative).parent.mkdir(parents=True, exist_ok=True)
        (out / relative).write_text(text)


def penguin_csv(out: Path, labelled: bool = True) -> None:
    """TFX's processed penguin CSV (see the module doc) at `out`; `labelled=False`: without its
    `species` column, as TFX's `penguins_unlabelled_processed.csv`."""
    _penguin_csv(out)
    if not labelled:
        rows = out.read_text().splitlines()
        out.write_text("".join(row.split(",", 1)[1] + "\n" for row in rows))


def _penguin_csv(out: Path) -> None:
    import palmerpenguins

    table = palmerpenguins.load_penguins().dropna().reset_index(drop=True)
    species = sorted(table["species"].unique())
    rows = ["species," + ",".join(_PENGUIN_COLUMNS)]
    scaled = {}
    for column, source in _PENGUIN_COLUMNS.items():
        values = table[source].astype(float)
        scaled[column] = (values - values.min()) / (values.max() - values.min())
    for i in range(len(table)):
        label = species.index(table["species"][i])
        rows.append(",".join([str(label)] + [repr(float(scaled[c][i])) for c in _PENGUIN_COLUMNS]))
    out.write_text("\n".join(rows) + "\n")


def copy_template(
    tfx_root: Path, name: str, out: Path, pipeline_name: str = "", tutorial: bool = False
) -> Path:
    """Copy template `name` of the unpacked wheel at `tfx_root` to `out`, as TFX's copy does.

    Args:
        tfx_root: the unpacked tfx wheel (its `tfx/` folder inside).
        name: the template, `taxi` or `penguin`.
        out: the destination folder.
        pipeline_name: the pipeline's name (default `my_NAME`).
        tutorial: also take the tutorial's steps, as TFX's e2e tests do: every
            `# components.append(` line uncommented.

    Returns:
        The copied `local_runner.py`.
    """
    tfx = tfx_root / "tfx"
    _copy_files(tfx / "experimental" / "templates" / name, out, pipeline_name or f"my_{name}")
    data = out / "data" / "data.csv"
    data.parent.mkdir(parents=True, exist_ok=True)
    if name == "taxi":
        data.write_bytes((tfx / "examples/chicago_taxi_pipeline/data/simple/data.csv").read_bytes())
    elif name == "penguin":
        _penguin_csv(data)
    if tutorial:
        add_all_components(out)
    return out / "local_runner.py"


def add_all_components(out: Path) -> None:
    """The tutorial's steps as TFX's template e2e tests take them (`_addAllComponents`): every
    `# components.append(` of the copied `pipeline/pipeline.py` uncommented.

    Args:
        out: the copied template's folder.
    """
    pipeline = out / "pipeline" / "pipeline.py"
    text = pipeline.read_text().replace("# components.append(", "components.append(")
    pipeline.write_text(text)
