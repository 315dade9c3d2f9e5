"""GPU benchmark: `generic-trainer train` against a plain Keras script on the same GPU, in one run
(issue 33).

One command on any machine with TensorFlow and a GPU (in the image: see docs/running/gpus.md):

  1. `generic-trainer doctor --json`: its lines are printed; without a GPU TensorFlow registers,
     the bench says so and exits 0 (nothing to measure);
  2. two cases on the generated penguin-like TFRecords of bench/overhead.py:
       penguin  bench/overhead.py's model (2 x Dense(32)), batch 128;
       wide     the same model with hidden layers of 2048 (the width of bench/wide_mlp.py), batch
                2048; its StringLookup layers keep Keras' auto jit (XLA) off, on both sides;
     each trained by four variants, every repetition running each once, in rotating order:
       plain          bench/overhead_plain.py: tf.data + model.fit + export, no generic-trainer;
       trainer        `generic-trainer train`, the module using the same tf.data pipeline;
       accessor_off   the module reading through the data accessor, --cache-examples off;
       accessor_cache the same with --cache-examples memory;
     per run: wall time, time to the first step (seconds after the process start, as both log it),
     steps/s of the last epoch, GPU utilisation sampled through NVML (nvidia-ml-py) every 100 ms
     (bench/nvml.py: the mean and the share of samples >= 80 % over the training, from the end
     of the first step to the end of the last epoch; the whole process's mean beside it), and
     the strategy and XLA lines of the log; before each case, one untimed plain run (--warmup);
  3. bench/wide_mlp.py itself (accessor vs raw tf.data vs the input alone) under the same sampler.

One table on stdout, everything in JSON (--json FILE, default bench/_work/gpu/results.json).

  .venv/bin/python bench/gpu.py                       # the whole bench
  .venv/bin/python bench/gpu.py --quick               # a few minutes: small data, one repetition
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
# bench/overhead.py, beside this file: the data, the commands, a log's first-step and rate lines
import overhead  # noqa: E402
from nvml import BUSY, NvmlSampler, devices  # noqa: E402

WORK = os.path.join(HERE, "_work", "gpu")
VARIANTS = ("plain", "trainer", "accessor_off", "accessor_cache")
CASES = {"penguin": {"units": 32, "batch_size": 128}, "wide": {"units": 2048, "batch_size": 2048}}
LOG_LINES = re.compile(r"resolved strategy=.*|.*XLA.*|.*jit_compile.*")
REGISTERED = re.compile(r"TensorFlow registered (\d+)")
KEYS = ("wall", "first_step", "steps_per_s", "gpu_util_mean", "gpu_busy_share")


def child_env() -> dict[str, str]:
    """bench/overhead.py's child environment with TensorFlow's INFO lines (XLA's "Compiled cluster
    using XLA!" is one)."""
    return plain_child_env() | {"TF_CPP_MIN_LOG_LEVEL": "0"}


plain_child_env = overhead.child_env
overhead.child_env = child_env  # run_child starts every variant with it


def doctor() -> tuple[int, list[dict]]:
    """Run `generic-trainer doctor --json`, print its lines; (GPUs TensorFlow registered, the
    checks)."""
    proc = subprocess.run(
        [overhead.TRAINER, "doctor", "--json"],
        capture_output=True,
        text=True,
        env=overhead.child_env(),
        cwd=overhead.REPO,
    )
    try:
        checks = json.loads(proc.stdout)["checks"]
    except (ValueError, KeyError):
        sys.exit(
            f"generic-trainer doctor printed no JSON (exit {proc.returncode}):\n"
            + proc.stderr[-3000:]
        )
    for check in checks:
        print(f"  doctor: {check['status']:<5} {check['name']:<20} {check['detail']}")
    found = [REGISTERED.search(c["detail"]) for c in checks if c["name"] == "gpus_registered"]
    return (int(found[0].group(1)) if found and found[0] else 0), checks


def command(variant: str, data: str, model_dir: str, case: dict, epochs: int) -> list[str]:
    """The command line of one variant (bench/overhead.py's, with the case's width and speed
    flags)."""
    base = "plain" if variant == "plain" else "trainer" if variant == "trainer" else "accessor_gt"
    cmd = overhead.command(base, data, model_dir, case["batch_size"], epochs)
    if variant == "plain":
        return [*cmd, "--units", str(case["units"])]
    config = json.loads(cmd[cmd.index("--custom-config") + 1]) | {"units": case["units"]}
    cmd[cmd.index("--custom-config") + 1] = json.dumps(config)
    return [*cmd, "--cache-examples", "memory" if variant == "accessor_cache" else "off"]


def run_one(variant: str, data: str, case_name: str, epochs: int, tag: str) -> dict:
    """One child run under the NVML sampler: its figures and its strategy / XLA log lines."""
    os.makedirs(WORK, exist_ok=True)
    model_dir = os.path.join(WORK, f"{case_name}-{tag}-{variant}")
    log_path = model_dir + ".log"
    cmd = command(variant, data, model_dir, CASES[case_name], epochs)
    try:
        with NvmlSampler() as sampler:
            start = time.perf_counter()  # run_child's own start, within a millisecond
            result = overhead.run_child(cmd, log_path)
    except SystemExit as e:  # run_child's exit on a failed child: recorded, the other runs go on
        shutil.rmtree(model_dir, ignore_errors=True)
        print(f"  {case_name:8s} {tag:5s} {variant:15s} FAILED: {e}"[-3000:], flush=True)
        return dict.fromkeys(KEYS, float("nan")) | {"failed": str(e)[-3000:]}
    shutil.rmtree(model_dir, ignore_errors=True)
    with open(log_path, errors="replace") as f:
        lines = [m.group(0).strip()[:400] for m in LOG_LINES.finditer(f.read())]
    result |= sampler.summary(training_window(start, result)) | {
        "log_lines": list(dict.fromkeys(lines))[:6]
    }
    print(
        f"  {case_name:8s} {tag:5s} {variant:15s} wall {result['wall']:6.1f} s  first step "
        f"{result['first_step']:5.1f} s  {result['steps_per_s']:7.1f} steps/s  GPU "
        f"{result['gpu_util_mean']:5.1f} % (>= {BUSY:.0f} %: {result['gpu_busy_share']:.0%})",
        flush=True,
    )
    return result


def training_window(start: float, result: dict) -> tuple[float, float] | None:
    """From the end of the first training step to the end of the last epoch, as perf_counter
    times (None when the log gave either time): the GPU figures are taken over it, not over the
    imports, start-up and export around it."""
    first, end = result["first_step"], result["epoch_end"]
    if math.isnan(first) or math.isnan(end) or end <= first:
        return None
    return start + first, start + end


def bench_case(case_name: str, data: str, repeats: int, epochs: int, warmup: int = 1) -> dict:
    """`warmup` untimed runs of the plain script (the driver's JIT cache of TensorFlow's kernels,
    the page cache), then every variant once per repetition, in rotating order; the runs and their
    medians."""
    warm = [run_one("plain", data, case_name, epochs, f"warm{i + 1}") for i in range(warmup)]
    runs: dict[str, list[dict]] = {v: [] for v in VARIANTS}
    for rep in range(repeats):
        for variant in VARIANTS[rep % len(VARIANTS) :] + VARIANTS[: rep % len(VARIANTS)]:
            runs[variant].append(run_one(variant, data, case_name, epochs, f"rep{rep + 1}"))
    median = {v: {k: statistics.median(r[k] for r in rs) for k in KEYS} for v, rs in runs.items()}
    return {"case": CASES[case_name], "warmup": warm, "runs": runs, "median": median}


def wide_mlp(quick: bool) -> dict:
    """bench/wide_mlp.py as it is, under the NVML sampler (its own table is printed as it runs)."""
    args = ["--examples", "50000", "--steps", "200", "--repeats", "1"] if quick else []
    with NvmlSampler() as sampler:
        proc = subprocess.run(
            [sys.executable, os.path.join(HERE, "wide_mlp.py"), *args],
            capture_output=True,
            text=True,
            env=overhead.child_env(),
        )
    print(proc.stdout[-4000:], flush=True)
    return {"returncode": proc.returncode, "stdout": proc.stdout[-8000:]} | sampler.summary()


def table(results: dict) -> str:
    """One markdown table: per case and variant, the medians and the wall time against plain."""
    rows = [
        "| case | variant | wall s | vs plain | first step s | steps/s | GPU util % "
        "| samples >= 80 % |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for case_name, case in results["cases"].items():
        plain = case["median"]["plain"]["wall"]
        for variant, m in case["median"].items():
            rows.append(
                f"| {case_name} | {variant} | {m['wall']:.1f} | {m['wall'] / plain:.3f}x | "
                f"{m['first_step']:.1f} | {m['steps_per_s']:.1f} | {m['gpu_util_mean']:.0f} | "
                f"{m['gpu_busy_share']:.0%} |"
            )
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--examples", type=int, default=500_000, help="training examples")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="50,000 examples, one repetition")
    parser.add_argument(
        "--warmup", type=int, default=1, help="untimed plain runs before each case's (default 1)"
    )
    parser.add_argument("--json", metavar="FILE", default=os.path.join(WORK, "results.json"))
    args = parser.parse_args(argv)
    print("doctor's checks:", flush=True)
    gpus, checks = doctor()
    if not gpus:
        print(
            "no GPU: TensorFlow registers none on this machine (doctor's lines above); "
            "nothing to measure"
        )
        return 0
    examples, repeats = (50_000, 1) if args.quick else (args.examples, args.repeats)
    data = overhead.ensure_data(examples)
    results = {"doctor": checks, "gpus": gpus, "examples": examples, "cases": {}}
    results["machine"] = overhead.machine()
    results["gpu_devices"] = devices()
    for case_name in CASES:
        results["cases"][case_name] = bench_case(case_name, data, repeats, args.epochs, args.warmup)
        save(results, args.json)  # what is measured so far survives a run cut short
    results["wide_mlp"] = wide_mlp(args.quick)
    save(results, args.json)
    print(
        "\n" + table(results) + f"\n\nMachine: {results['machine']}; GPUs: "
        f"{', '.join(results['gpu_devices']) or 'not named (no NVML)'}"
    )
    print(f"JSON: {args.json}")
    return 0


def save(results: dict, path: str) -> None:
    """Write the results as JSON to path (its folder created)."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(results, f, indent=1, default=str)


if __name__ == "__main__":
    sys.exit(main())
