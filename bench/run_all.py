"""`make bench`: every benchmark, one after the other, each rewriting its own section of
bench/README.md.

  bench/overhead.py        start-up, generic-trainer vs a plain Keras script, memory over 10x the
  data bench/input_pipeline.py  the data accessor vs tfx_bsl vs raw tf.data, penguin-like and wide
  schema

Raw results of the overhead bench go to bench/_work/overhead-results.json. `--quick` runs small
versions of everything and leaves bench/README.md alone (a smoke test of the benches, not figures).

  .venv/bin/python bench/run_all.py            # full figures (tens of minutes on 2 cores)
  .venv/bin/python bench/run_all.py --quick    # a few minutes, prints only
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)


def benches(quick: bool) -> list[list[str]]:
    results = os.path.join(HERE, "_work", "overhead-results.json")
    if quick:
        results = results.replace(".json", "-quick.json")
        return [
            [
                "overhead.py",
                "--examples",
                "20000",
                "--large-examples",
                "100000",
                "--repeats",
                "1",
                "--startup-repeats",
                "1",
                "--no-readme",
                "--json",
                results,
            ],
            [
                "input_pipeline.py",
                "--both",
                "--examples",
                "20000",
                "--wide-examples",
                "5000",
                "--repeats",
                "1",
                "--no-readme",
            ],
        ]
    return [["overhead.py", "--json", results], ["input_pipeline.py", "--both"]]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="small versions, README untouched")
    args = parser.parse_args(argv)
    os.makedirs(os.path.join(HERE, "_work"), exist_ok=True)
    failed = []
    for bench in benches(args.quick):
        cmd = [sys.executable, os.path.join(HERE, bench[0]), *bench[1:]]
        print(
            f"\n=== {' '.join(['bench/' + bench[0], *bench[1:]])}  (load {os.getloadavg()[0]:.1f})",
            flush=True,
        )
        start = time.perf_counter()
        rc = subprocess.run(cmd, cwd=REPO).returncode
        print(f"=== {bench[0]}: exit {rc} after {time.perf_counter() - start:.0f} s", flush=True)
        if rc:
            failed.append(bench[0])
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    print(
        "\nall benches done"
        + ("" if args.quick else f"; figures in {os.path.join(HERE, 'README.md')}")
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
