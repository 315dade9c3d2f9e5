#!/bin/bash
# On the device: unpack the carried TensorFlow tree (once per warm machine), make a python that
# sees only it (plus the runtime and bench of .gpu/tree), then bench/gpu.py (doctor first).
# Made by bench/gpu_device/pack.sh; results, the log and the run logs go to $OUT.
# Usage: bash .gpu/device.sh [gpu.py args...]   ($SITE, $GV, $PYBASE overridable for a local test)
set -u
G=$(cd "$(dirname "$0")" && pwd); T=$G/tree
SITE=${SITE:-/tmp/site}; GV=${GV:-/tmp/gv}; O=${OUT:-/tmp/out}; mkdir -p "$O"
PYBASE=${PYBASE:-$(readlink -f /opt/torch/.venv/bin/python3)}
Z() { LD_LIBRARY_PATH=$G/zbin "$G/zbin/zstd" "$@"; }
mkdir -p /tmp/ch; [ -d /opt/torch ] && mv "$G"/chunks/* /tmp/ch/ 2>/dev/null
if [ ! -f "$SITE/.done" ]; then
  t0=$(date +%s); mkdir -p "$SITE"
  ls /tmp/ch | paste -sd' '; du -sb /tmp/ch
  cat /tmp/ch/all.* | Z -dc --long=27 | tar -C "$SITE" -xif - || { echo "UNPACK FAILED"; exit 3; }
  touch "$SITE/.done"; echo "unpacked in $(( $(date +%s) - t0 )) s: $(du -sh "$SITE" | cut -f1)"
fi
V=$("$PYBASE" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
mkdir -p "$GV/bin" "$GV/lib/python$V/site-packages"
printf 'home = %s\ninclude-system-site-packages = false\nversion = %s\n' \
  "$(dirname "$PYBASE")" "$V" > "$GV/pyvenv.cfg"
ln -sfn "$PYBASE" "$GV/bin/python3"; ln -sfn python3 "$GV/bin/python"
printf 'import site; site.addsitedir("%s")\n%s\n' "$SITE" "$T/runtime" \
  > "$GV/lib/python$V/site-packages/gt.pth"
printf '#!%s\nimport sys\nfrom generic_trainer.cli import main\nsys.exit(main())\n' \
  "$GV/bin/python3" > "$GV/bin/generic-trainer"
chmod +x "$GV/bin/generic-trainer"
LD_LIBRARY_PATH=$(ls -d "$SITE"/nvidia/*/lib | paste -sd:)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export LD_LIBRARY_PATH PYTHONUNBUFFERED=1 PATH=$GV/bin:$PATH CUDA_CACHE_MAXSIZE=4294967296
echo "python: $("$GV/bin/python3" -c \
  'import sys, numpy; print(sys.version.split()[0], sys.prefix, numpy.__version__)')"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1 \
  | tee "$O/nvidia-smi.txt"
cd "$T"
echo "== ${BENCH:-bench/gpu.py} $*"
python3 ${BENCH:-bench/gpu.py} --json "$O/results.json" "$@" 2>&1 | tee "$O/bench.log"
rc=${PIPESTATUS[0]}
tar -czf "$O/logs.tgz" -C bench/_work gpu 2>/dev/null
echo "bench rc=$rc"; exit $rc
