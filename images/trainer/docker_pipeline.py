"""The penguin pipeline run by kfp.local's DockerRunner: every component in the real trainer image.

DockerRunner starts each task as `docker run IMAGE <command> <args>` (the component's command after
the image's ENTRYPOINT), bind-mounts the pipeline root at the same path, and reads the executor
output back from it: the downstream tasks get the upstream artifacts only through that root, as on a
cluster. The containers run as a non-root user (`--user`, default the image's 1000:1000), so this
driver makes what kfp.local creates on the host writable for it (umask 0) and copies the example's
inputs into the pipeline root (the only host directory a task sees).

Used by images/trainer/smoke.sh (`make image-test`) after the image is in the docker engine:
    python images/trainer/docker_pipeline.py --image generic-trainer:smoke-cpu --pipeline-root DIR
Prints one JSON line of the checked artifacts and exits 1 when one is missing.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLE = os.path.join(REPO, "examples", "penguin")
INPUTS = ("penguins.csv", "schema.pbtxt", "module_transform.py")

# What each component must have written (globs under the pipeline root), read by the next one.
EXPECTED = {
    "import-examples: examples": "**/generic-import-examples*/examples/**/Split-train/*",
    "import-examples: schema": "**/generic-import-examples*/output_schema/**/schema.pbtxt",
    "transform: graph": "**/generic-transform*/transform_graph/**/transform_fn/saved_model.pb",
    "tuner: best hyperparameters": "**/generic-tuner*/best_hyperparameters/"
    "**/best_hyperparameters.txt",
    "trainer: serving model": "**/generic-trainer*/model/**/Format-Serving/saved_model.pb",
    # export_tflite's default
    "trainer: TFLite model": "**/generic-trainer*/model/**/Format-TFLite/model.tflite",
    "evaluator: blessing": "**/generic-evaluator*/blessing/**/BLESSED",
    "infra-validator: blessing": "**/generic-infra-validator*/blessing/**/INFRA_BLESSED",
}


def run(image: str, root: str, user: str, train_steps: int, max_trials: int) -> dict:
    sys.path.insert(0, REPO)
    from kfp import local

    from pipelines.penguin_pipeline import build_pipeline

    os.umask(0)  # kfp.local's output directories: writable by the container's user
    os.makedirs(root, exist_ok=True)
    inputs = os.path.join(root, "inputs")
    os.makedirs(inputs, exist_ok=True)
    for name in INPUTS:
        shutil.copy(os.path.join(EXAMPLE, name), os.path.join(inputs, name))
    workspace = os.path.join(root, "workspace")
    os.makedirs(workspace, exist_ok=True)
    local.init(
        runner=local.DockerRunner(user=user),
        pipeline_root=root,
        workspace_root=workspace,
        raise_on_error=True,
    )
    started = time.time()
    build_pipeline(image=image, tune=True)(
        csv_uri=os.path.join(inputs, "penguins.csv"),
        schema_uri=os.path.join(inputs, "schema.pbtxt"),
        module_file=os.path.join(inputs, "module_transform.py"),
        train_args={"num_steps": train_steps},
        eval_args={"num_steps": 20},
        tuner_train_args={"num_steps": max(train_steps // 4, 1)},
        max_trials=max_trials,
    )
    found = {
        what: sorted(glob.glob(os.path.join(root, pattern), recursive=True))
        for what, pattern in EXPECTED.items()
    }
    return {
        "seconds": round(time.time() - started, 1),
        "artifacts": {what: paths[0] if paths else None for what, paths in found.items()},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--image", required=True, help="the image in the docker engine (the components run it)"
    )
    parser.add_argument(
        "--pipeline-root", required=True, help="kfp.local's pipeline root (absolute or relative)"
    )
    parser.add_argument(
        "--user", default="1000:1000", help="the containers' user (default: the image's)"
    )
    parser.add_argument("--train-steps", type=int, default=100)
    parser.add_argument("--max-trials", type=int, default=2)
    args = parser.parse_args(argv)
    result = run(
        args.image,
        os.path.abspath(args.pipeline_root),
        args.user,
        args.train_steps,
        args.max_trials,
    )
    print(json.dumps(result))
    missing = [what for what, path in result["artifacts"].items() if not path]
    if missing:
        print(f"docker_pipeline: missing artifacts: {', '.join(missing)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
