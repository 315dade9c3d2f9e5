"""Compile the components into their checked-in YAML: `python -m components.build [--image IMAGE]
[--check]`.

Writes components/<name>/component.yaml for trainer, tuner, evaluator, infra_validator,
import_examples, transform, pusher, bulk_inferrer and resolver. `--check` compiles into a temporary
dir and exits 1 (printing a diff) when a checked-in file differs, so CI catches a component
definition changed without recompiling. The image defaults to components.specs.DEFAULT_IMAGE (or
$GENERIC_TRAINER_IMAGE).
"""

from __future__ import annotations

import argparse
import difflib
import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from typing import Any

from components import specs

HERE = os.path.dirname(os.path.abspath(__file__))
COMPONENTS: dict[str, Callable[[str | None], Any]] = {
    "trainer": specs.trainer_component,
    "tuner": specs.tuner_component,
    "evaluator": specs.evaluator_component,
    "infra_validator": specs.infra_validator_component,
    "import_examples": specs.import_examples_component,
    "transform": specs.transform_component,
    "pusher": specs.pusher_component,
    "bulk_inferrer": specs.bulk_inferrer_component,
    "resolver": specs.resolver_component,
}


def yaml_path(name: str, root: str = HERE) -> str:
    """Where the YAML of component `name` lives under `root`."""
    return os.path.join(root, name, "component.yaml")


def compile_all(out_root: str = HERE, image: str | None = None) -> dict[str, str]:
    """Compile every component for `image` under `out_root`; returns name -> YAML path."""
    from kfp import compiler

    written = {}
    for name, factory in COMPONENTS.items():
        path = yaml_path(name, out_root)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        compiler.Compiler().compile(factory(image), path)
        written[name] = path
    return written


def stale(image: str | None = None, root: str = HERE) -> dict[str, str]:
    """Components whose YAML under `root` differs from a fresh compile: name -> unified diff."""
    diffs = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, fresh in compile_all(tmp, image).items():
            checked_in = yaml_path(name, root)
            old = open(checked_in, encoding="utf-8").read() if os.path.exists(checked_in) else ""
            new = open(fresh, encoding="utf-8").read()
            if old != new:
                diffs[name] = "".join(
                    difflib.unified_diff(
                        old.splitlines(keepends=True),
                        new.splitlines(keepends=True),
                        checked_in,
                        "compiled",
                    )
                )
    return diffs


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m components.build", description=__doc__.split("\n")[0]
    )
    parser.add_argument(
        "--image", help=f"container image (default ${specs.IMAGE_ENV} or {specs.DEFAULT_IMAGE})"
    )
    parser.add_argument(
        "--out-dir", default=HERE, help="root to write <name>/component.yaml under (default: here)"
    )
    parser.add_argument(
        "--check", action="store_true", help="do not write; exit 1 if the YAML is out of date"
    )
    args = parser.parse_args(argv)
    image = specs.resolve_image(args.image)
    if args.check:
        diffs = stale(image, args.out_dir)
        for name, diff in diffs.items():
            print(
                f"{name}: {yaml_path(name, args.out_dir)} is out of date; run python -m "
                f"components.build\n{diff}"
            )
        return 1 if diffs else 0
    for name, path in compile_all(args.out_dir, image).items():
        print(f"{name}: {path} (image {image})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
