#!/usr/bin/env bash
# Image test of the trainer image, with no registry (`make image-test`):
#   1. builds a local Debian bookworm base image (debootstrap; python3 is 3.11; without the docs,
#      manual pages and translations, like debian:bookworm-slim under the default
#      python:3.11-slim-bookworm), once: it is reused while `localhost/generic-trainer-base`
#      exists in buildah's storage (REBUILD_BASE=1 builds it again);
#   2. builds images/trainer/Dockerfile on it with buildah (vfs storage, chroot isolation, nice 10);
#   3. uses the docker engine that answers `docker info`, or starts one (dockerd, overlay2 storage where
#      the kernel allows, else vfs; its own data root and socket in a temporary directory), stopped and
#      removed at the end; loads the image into it;
#   4. runs the image's ENTRYPOINT both ways: CLI arguments (`docker run IMAGE train ...`) and a whole
#      command (`docker run IMAGE generic-trainer ...`, `python`, `sh`, as kfp.local's DockerRunner does);
#      then every verb's --help; `ldd` on every shared library under tensorflow/ and nvidia/ (only the
#      driver's libcuda.so.1 may be missing); for ACCELERATOR=cuda every nvidia/*/lib library opened with
#      dlopen(RTLD_NOW), every soname TensorFlow's GPU loader opens resolved the way dlopen from
#      libtensorflow_framework.so.2 finds it (the package's generic_trainer.diagnose.dlopen), and
#      TensorFlow checked to be the CUDA build (the GPU image runs with CUDA_VISIBLE_DEVICES="": it
#      trains on the CPU); `docker run IMAGE doctor` passes (exit 0, every line ok or warn);
#   5. runs the README's `docker run` command on the bundled penguin example (mounted read-only, as the
#      non-root user 1000:1000), checks the model (loaded and called inside the image), metrics and
#      report; checks that no heavy optional library (tensorflow-transform, Beam, kfp, Google Cloud
#      clients, keras-tuner) is imported before the user's code runs;
#   6. runs the penguin pipeline with kfp.local's DockerRunner (images/trainer/docker_pipeline.py):
#      import-examples, transform, tuner, trainer, evaluator and infra-validator each in the image,
#      each reading the artifacts of the one before from the pipeline root;
#   6b. runs TFX's own mnist_pipeline_native_keras.py (the tfx 1.21.0 wheel's, unedited) with
#      `generic-trainer tfx-pipeline run --docker-image IMAGE`: every step in the image, the HOME
#      folders it reads mounted, the model pushed under HOME, owned by this user, served in the image;
#   7. prints the image size, the times and the cold start (seconds from `docker run` to the first
#      training step), and writes them to $WORK/summary.json.
#
# Usage: bash images/trainer/smoke.sh        (or: make image-test). Needs root, buildah, debootstrap
# and docker.io (installed with apt-get when missing), the Debian mirror and PyPI, and the dev venv
# (`make install`: kfp and the docker client library, for step 6).
# Knobs (environment): ACCELERATOR=cpu|cuda (default cpu), CUDA_LOCK (default cuda.lock), IMAGE, DOCKER_IMAGE, BASE_IMAGE, WORK,
# REBUILD_BASE=1, SKIP_BUILD=1 (reuse $IMAGE), BUILD_ONLY=1, SKIP_PIPELINE=1, SKIP_TFX_FILE=1,
# TFX_ROOT (the unpacked tfx 1.21.0 wheel; default: downloaded into $WORK), TRAIN_STEPS,
# PIPELINE_TRAIN_STEPS, STORAGE_DRIVER (buildah's, default vfs), DOCKERD_STORAGE (overlay2 or vfs),
# UV_CACHE (host uv cache mounted into the build, default ~/.cache/uv), DEBIAN_MIRROR,
# PY (the dev venv's python).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
ACCELERATOR=${ACCELERATOR:-cpu}
CUDA_LOCK=${CUDA_LOCK:-cuda.lock}
IMAGE=${IMAGE:-localhost/generic-trainer:smoke-${ACCELERATOR}}
BASE_IMAGE=${BASE_IMAGE:-localhost/generic-trainer-base}
WORK=${WORK:-$ROOT/out/image-smoke}
UV_CACHE=${UV_CACHE:-$HOME/.cache/uv}
PY=${PY:-$ROOT/.venv/bin/python}
# The image's name in the docker engine (what the pipeline's components are compiled for).
DOCKER_IMAGE=${DOCKER_IMAGE:-generic-trainer:smoke-${ACCELERATOR}}
CA_BUNDLE=${CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}
export STORAGE_DRIVER=${STORAGE_DRIVER:-vfs}
# The line of the training log that marks the first training step: the runtime's own
# "first training step done (N s after process start)"; Keras' "Epoch 1/" only as a fallback.
FIRST_STEP_RE=${FIRST_STEP_RE:-first training step}
FALLBACK_STEP_RE='Epoch 1/'

bh() { buildah --storage-driver "$STORAGE_DRIVER" "$@"; }
now() { date +%s.%N; }
secs() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$1" "$2"; }
log() { printf '\n== %s\n' "$*"; }
die() { echo "smoke: FAIL: $*" >&2; exit 1; }

T_START=$(now)
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)  # absolute: docker -v needs it (WORK=out/... is relative to the caller)

# --- 0. tools ----------------------------------------------------------------------------------
if ! command -v buildah >/dev/null || ! command -v debootstrap >/dev/null \
   || { [ "${BUILD_ONLY:-0}" != 1 ] && ! command -v dockerd >/dev/null; }; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    log "installing buildah, debootstrap and docker.io"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q buildah debootstrap docker.io >/dev/null \
      || { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q buildah debootstrap docker.io >/dev/null; }
  else
    die "needs buildah, debootstrap and docker.io (apt-get install buildah debootstrap docker.io), run as root"
  fi
fi
[ "$(id -u)" = 0 ] || die "run as root (debootstrap, buildah chroot isolation)"

# --- 1. local base image -----------------------------------------------------------------------
if [ "${REBUILD_BASE:-0}" = 1 ]; then bh rmi -f "$BASE_IMAGE" >/dev/null 2>&1 || true; fi
if bh inspect --type image "$BASE_IMAGE" >/dev/null 2>&1; then
  log "base image $BASE_IMAGE: reusing"
else
  mirror=${DEBIAN_MIRROR:-$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)}
  mirror=${mirror:-http://deb.debian.org/debian}
  log "base image $BASE_IMAGE: debootstrap bookworm from $mirror"
  t=$(now)
  rootfs=$(mktemp -d "$WORK/rootfs.XXXXXX")
  debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
    bookworm "$rootfs" "$mirror" >"$WORK/debootstrap.log" 2>&1 \
    || { tail -20 "$WORK/debootstrap.log"; die "debootstrap failed"; }
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* "$rootfs"/tmp/*
  # What Debian's slim images (debian:bookworm-slim, under python:3.11-slim-bookworm) leave out:
  # documentation but the copyright files, manual and info pages, translations (about 50 MB).
  find "$rootfs"/usr/share/doc -mindepth 1 ! -type d ! -name copyright -delete
  find "$rootfs"/usr/share/doc -mindepth 1 -type d -empty -delete
  rm -rf "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* "$rootfs"/usr/share/locale/* \
    "$rootfs"/usr/share/lintian/overrides/*
  c=$(bh from scratch)
  bh copy "$c" "$rootfs" / >/dev/null
  bh config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --env LANG=C.UTF-8 --cmd /bin/bash "$c"
  bh commit --quiet --rm "$c" "$BASE_IMAGE" >/dev/null
  rm -rf "$rootfs"
  echo "base built in $(secs "$t" "$(now)") s"
fi

# --- 2. the image ------------------------------------------------------------------------------
T_BUILD=
if [ "${SKIP_BUILD:-0}" = 1 ] && bh inspect --type image "$IMAGE" >/dev/null 2>&1; then
  log "image $IMAGE: reusing (SKIP_BUILD=1)"
else
  log "building $IMAGE from images/trainer/Dockerfile (ACCELERATOR=$ACCELERATOR CUDA_LOCK=$CUDA_LOCK)"
  vols=()
  # The build's downloads go through this machine's TLS proxy, whose CA is only in the host's
  # bundle: mount it for the build, never bake it in.
  [ -f "$CA_BUNDLE" ] && vols+=(--volume "$CA_BUNDLE:/etc/ssl/certs/ca-certificates.crt:ro")
  # Reuse the host's uv cache (wheels the dev venv already downloaded).
  [ -d "$UV_CACHE" ] && vols+=(--volume "$UV_CACHE:/root/.cache/uv")
  t=$(now)
  nice -n 10 buildah --storage-driver "$STORAGE_DRIVER" bud --isolation chroot --network host "${vols[@]}" \
    --build-arg BASE_IMAGE="$BASE_IMAGE" --build-arg ACCELERATOR="$ACCELERATOR" --build-arg CUDA_LOCK="$CUDA_LOCK" \
    -f "$ROOT/images/trainer/Dockerfile" -t "$IMAGE" "$ROOT" 2>&1 | tee "$WORK/build.log" \
    | grep -E '^(STEP|COMMIT)|error|Error' || true
  [ "${PIPESTATUS[0]}" = 0 ] || die "build failed, see $WORK/build.log"
  T_BUILD=$(secs "$t" "$(now)")
  echo "built in $T_BUILD s"
  # Build intermediates (the builder stage) are not needed any more.
  bh rmi --prune >/dev/null 2>&1 || true
fi

size_of() {  # uncompressed size in bytes of an image: the sum of its layers' diff sizes
  python3 - "$1" "$(bh info --format '{{.store.GraphRoot}}')" "$STORAGE_DRIVER" <<'EOF'
import json, sys
name, root, driver = sys.argv[1:]
if ":" not in name.rsplit("/", 1)[-1]:
    name += ":latest"
images = json.load(open(f"{root}/{driver}-images/images.json"))
layers = {l["id"]: l for l in json.load(open(f"{root}/{driver}-layers/layers.json"))}
top = [im["layer"] for im in images if name in (im.get("names") or [])]
if not top:
    sys.exit("image not found: " + name)
total, layer = 0, top[0]
while layer:
    total += layers[layer]["diff-size"]
    layer = layers[layer].get("parent")
print(total)
EOF
}
IMAGE_BYTES=$(size_of "$IMAGE")
BASE_BYTES=$(size_of "$BASE_IMAGE")
IMAGE_MB=$((IMAGE_BYTES / 1000000))
BASE_MB=$((BASE_BYTES / 1000000))
echo "image size (uncompressed): $IMAGE_MB MB ($IMAGE_BYTES bytes); base $BASE_MB MB"
if [ "${BUILD_ONLY:-0}" = 1 ]; then echo "smoke: built (BUILD_ONLY=1)"; exit 0; fi

# --- 3. static facts of the built image --------------------------------------------------------
img_cfg() {  # img_cfg KEY: a field of the image's OCI config, as JSON
  bh inspect --type image "$IMAGE" | python3 -c 'import json, sys; print(json.dumps(json.load(sys.stdin)["OCIv1"]["config"].get(sys.argv[1])))' "$1"
}
ENTRYPOINT_JSON=$(img_cfg Entrypoint)
IMAGE_USER=$(img_cfg User | tr -d '"')
[ "$ENTRYPOINT_JSON" = '["/usr/local/bin/generic-trainer-entrypoint"]' ] || die "entrypoint is $ENTRYPOINT_JSON"
case "$IMAGE_USER" in ""|0|0:*|root|root:*) die "image runs as root ($IMAGE_USER)";; esac
[ -x "$PY" ] || die "no dev venv python at $PY (run make install)"

# --- 4. a docker engine, with the image in it -------------------------------------------------
DOCKERD_PID=
DOCKERD_DIR=
cleanup() {
  if [ -n "$DOCKERD_PID" ]; then
    echo "stopping the docker engine this test started (pid $DOCKERD_PID)"
    kill "$DOCKERD_PID" 2>/dev/null || true
    for _ in $(seq 60); do kill -0 "$DOCKERD_PID" 2>/dev/null || break; sleep 1; done
    kill -9 "$DOCKERD_PID" 2>/dev/null || true
  fi
  if [ -n "$DOCKERD_DIR" ]; then
    chmod -R u+w "$DOCKERD_DIR" 2>/dev/null || true
    rm -rf "$DOCKERD_DIR"
  fi
}
trap cleanup EXIT
T_DOCKERD=
if docker info >/dev/null 2>&1; then
  log "docker engine: using the running one"
else
  DOCKERD_DIR=$(mktemp -d /tmp/gt-dockerd.XXXXXX)
  # overlay2 when this kernel mounts overlays here (a container costs no copy of the image); vfs else
  # (every `docker run` copies the whole image: a minute or more each for this one).
  DOCKERD_STORAGE=${DOCKERD_STORAGE:-}
  if [ -z "$DOCKERD_STORAGE" ]; then
    mkdir -p "$DOCKERD_DIR"/ovl/{lower,upper,work,merged}
    if mount -t overlay overlay -o "lowerdir=$DOCKERD_DIR/ovl/lower,upperdir=$DOCKERD_DIR/ovl/upper,workdir=$DOCKERD_DIR/ovl/work" \
         "$DOCKERD_DIR/ovl/merged" 2>/dev/null; then
      umount "$DOCKERD_DIR/ovl/merged"
      DOCKERD_STORAGE=overlay2
    else
      DOCKERD_STORAGE=vfs
    fi
    rm -rf "$DOCKERD_DIR/ovl"
  fi
  log "docker engine: starting dockerd ($DOCKERD_STORAGE storage, no iptables, no bridge; its own data root and socket)"
  export DOCKER_HOST="unix://$DOCKERD_DIR/docker.sock"
  t=$(now)
  dockerd --storage-driver="$DOCKERD_STORAGE" --iptables=false --ip-masq=false --bridge=none \
    --data-root "$DOCKERD_DIR/data" --exec-root "$DOCKERD_DIR/exec" --pidfile "$DOCKERD_DIR/docker.pid" \
    --host "$DOCKER_HOST" >"$WORK/dockerd.log" 2>&1 &
  DOCKERD_PID=$!
  for _ in $(seq 120); do
    docker info >/dev/null 2>&1 && break
    kill -0 "$DOCKERD_PID" 2>/dev/null || { tail -20 "$WORK/dockerd.log"; die "dockerd exited"; }
    sleep 1
  done
  docker info >/dev/null 2>&1 || { tail -20 "$WORK/dockerd.log"; die "dockerd did not answer in 120 s"; }
  T_DOCKERD=$(secs "$t" "$(now)")
  echo "dockerd ready in $T_DOCKERD s"
fi
log "pushing $IMAGE into the engine as $DOCKER_IMAGE"
t=$(now)
# Through a docker-archive file and `docker load`: buildah's docker-daemon: transport ignores DOCKER_HOST.
ARCHIVE=$(mktemp "$WORK/image.XXXXXX.tar")
rm -f "$ARCHIVE"
bh push --quiet "$IMAGE" "docker-archive:$ARCHIVE:$DOCKER_IMAGE" >/dev/null || die "buildah push to a docker archive failed"
docker load -i "$ARCHIVE" || { rm -f "$ARCHIVE"; die "docker load failed"; }
rm -f "$ARCHIVE"
T_PUSH=$(secs "$t" "$(now)")
echo "pushed in $T_PUSH s"

RUN_DIR="$WORK/run"
rm -rf "$RUN_DIR"
mkdir -p "$RUN_DIR"
chmod 0777 "$RUN_DIR"
EX="$ROOT/examples/penguin"
# The GPU image is run with no GPU visible (CUDA_VISIBLE_DEVICES=""): it trains on the CPU, here and on a GPU host.
DRUN_ENV=()
[ "$ACCELERATOR" = cuda ] && DRUN_ENV=(-e CUDA_VISIBLE_DEVICES=)
drun() {  # drun ARGS...: docker run the image as 1000:1000, the example read-only at /penguin, output at /out
  docker run --rm --user 1000:1000 "${DRUN_ENV[@]}" -v "$EX:/penguin:ro" -v "$RUN_DIR:/out" "$DOCKER_IMAGE" "$@"
}
# Prefix every output line with the seconds since $1 (the moment `docker run` is started).
stamp() { python3 -u -c '
import sys, time
t0 = float(sys.argv[1])
for line in sys.stdin:
    sys.stdout.write(f"{time.time() - t0:8.2f} {line}")' "$1"; }

# --- 5. the entrypoint, both ways --------------------------------------------------------------
log "entrypoint: CLI arguments get generic-trainer, a command runs as given"
t=$(now); drun true || die "docker run IMAGE true failed"; T_NOOP=$(secs "$t" "$(now)")
T_HELP=()
for _ in 1 2 3; do
  t=$(now); drun --help >"$WORK/help.txt" 2>&1 || { cat "$WORK/help.txt"; die "docker run IMAGE --help failed"; }
  T_HELP+=("$(secs "$t" "$(now)")")
done
grep -q "usage: generic-trainer" "$WORK/help.txt" || die "docker run IMAGE --help did not print generic-trainer's usage"
# (to a file first: `grep -q` closes the pipe early and pipefail would report docker's broken pipe)
drun generic-trainer train --help >"$WORK/help-train.txt" 2>&1 || die "docker run IMAGE generic-trainer train --help"
grep -q "usage: generic-trainer train" "$WORK/help-train.txt" || die "docker run IMAGE generic-trainer train --help: no usage"
drun train --help >"$WORK/help-train.txt" 2>&1 || die "docker run IMAGE train --help"
grep -q "usage: generic-trainer train" "$WORK/help-train.txt" || die "docker run IMAGE train --help: no usage"
[ "$(drun sh -c 'echo "$0:$(id -u)"')" = "sh:1000" ] || die "docker run IMAGE sh -c ... did not run sh as 1000"
[ "$(drun python -c 'import sys; print(sys.prefix)')" = "/opt/venv" ] || die "docker run IMAGE python ... is not the venv's"
set +e
drun no-such-verb >"$WORK/bad-verb.txt" 2>&1
rc=$?
set -e
{ [ "$rc" = 2 ] && grep -q "invalid choice: 'no-such-verb'" "$WORK/bad-verb.txt"; } \
  || { cat "$WORK/bad-verb.txt"; die "an unknown verb must be generic-trainer's usage error (exit 2), got $rc"; }
# vertex-job runs where jobs are launched: the image leaves google-cloud-aiplatform out and says so.
set +e
drun vertex-job --project p --region us-central1 --image img --base-output-dir gs://b/run --dry-run \
  -- --examples gs://b/data --module-file gs://b/module.py --model-dir gs://b/model >"$WORK/vertex-job.txt" 2>&1
rc=$?
set -e
{ [ "$rc" = 2 ] && grep -q "needs google-cloud-aiplatform, which the runtime image leaves out" "$WORK/vertex-job.txt"; } \
  || { cat "$WORK/vertex-job.txt"; die "vertex-job in the image must name the missing google-cloud-aiplatform (exit 2), got $rc"; }
T_HELP_IN=$(drun python -c 'import subprocess, time; t = time.time(); subprocess.run(["generic-trainer", "--help"], capture_output=True, check=True); print(f"{time.time() - t:.2f}")')
echo "docker run true: $T_NOOP s; docker run IMAGE --help: ${T_HELP[*]} s (inside: $T_HELP_IN s)"

log "every verb's --help"
VERBS=$(sed -n 's/^VERBS="\(.*\)"$/\1/p' "$ROOT/images/trainer/entrypoint.sh")
[ -n "$VERBS" ] || die "no VERBS line in images/trainer/entrypoint.sh"
for verb in $VERBS; do
  # (to a file first: `grep -q` would close the pipe early and pipefail report docker's SIGPIPE)
  drun "$verb" --help >"$WORK/help-$verb.txt" 2>&1 || { cat "$WORK/help-$verb.txt"; die "docker run IMAGE $verb --help failed"; }
  grep -q "usage: generic-trainer $verb" "$WORK/help-$verb.txt" || { cat "$WORK/help-$verb.txt"; die "docker run IMAGE $verb --help: no usage"; }
done
echo "ok: $VERBS"

log "shared libraries: every one under tensorflow/ and nvidia/ resolves (ldd), but the driver's libcuda.so.1"
drun sh -c 'cd "$(python -c "import sysconfig; print(sysconfig.get_path(\"purelib\"))")" && find tensorflow nvidia -type f -name "*.so*" 2>/dev/null | while read -r f; do ldd "$f" 2>&1 | sed -n "s|^[[:space:]]*\([^ ]*\) => not found|$f: \1|p"; done' \
  >"$WORK/ldd.txt" || die "ldd in the image failed"
grep -v ': libcuda\.so\.1$' "$WORK/ldd.txt" && die "shared libraries that do not resolve in the image (above; all: $WORK/ldd.txt)"
echo "ldd: nothing unresolved but $(wc -l <"$WORK/ldd.txt") x libcuda.so.1 (the driver's, injected by the container runtime on a GPU host)"

if [ "$ACCELERATOR" = cuda ]; then
  log "GPU image: every CUDA library TensorFlow opens resolves by soname, as dlopen from libtensorflow_framework.so.2 searches"
  # (its RUNPATH, LD_LIBRARY_PATH, the ld.so cache: TensorFlow skips the GPU when one does not, and trains on the CPU)
  drun sh -c 'python -m generic_trainer.diagnose.dlopen "$(python -c "import sysconfig; print(sysconfig.get_path(\"purelib\"))")"' \
    2>&1 | tee "$WORK/dlopen.txt"
  [ "${PIPESTATUS[0]}" = 0 ] || die "CUDA libraries TensorFlow opens do not resolve in the image (above)"
  log "GPU image: every CUDA library opens (dlopen RTLD_NOW, no GPU here), TensorFlow is the CUDA build"
  drun python -c '
import ctypes, glob, os, sysconfig
site = sysconfig.get_path("purelib")
opened, driver = [], []
for path in sorted(glob.glob(site + "/nvidia/*/lib/*.so*")):
    try:
        ctypes.CDLL(path, mode=os.RTLD_NOW | os.RTLD_LOCAL)
        opened.append(os.path.basename(path))
    except OSError as e:
        if "libcuda.so.1" not in str(e):
            raise SystemExit(f"cannot load {path}: {e}")
        driver.append(os.path.basename(path))
import tensorflow as tf
info = tf.sysconfig.get_build_info()
assert info["is_cuda_build"], info
print(f"opened {len(opened)} CUDA libraries: {opened}; need the driver: {driver}")
cuda, cudnn, caps = info.get("cuda_version"), info.get("cudnn_version"), info.get("cuda_compute_capabilities")
gpus = tf.config.list_physical_devices("GPU")
print(f"TensorFlow {tf.__version__}: CUDA {cuda}, cuDNN {cudnn}, compute capabilities {caps}; GPUs here: {gpus}")
' 2>&1 | grep -v -E '^(WARNING: All log messages|[IWE]0000 )' | tee "$WORK/cuda-libs.txt"
  [ "${PIPESTATUS[0]}" = 0 ] || die "the CUDA libraries do not load in the image"
fi

log "doctor: what train would find in the image (docker run IMAGE doctor)"
set +e
drun doctor --examples /penguin/data --module-file /penguin/module.py --model-dir /out/doctor-model \
  >"$WORK/doctor.txt" 2>"$WORK/doctor.log"
rc=$?
set -e
cat "$WORK/doctor.txt"
[ "$rc" = 0 ] || { tail -20 "$WORK/doctor.log"; die "docker run IMAGE doctor exited with $rc (lines above)"; }
grep -q '^ok    gpus_registered' "$WORK/doctor.txt" || die "doctor printed no ok gpus_registered line"
[ ! -e "$RUN_DIR/doctor-model" ] || die "doctor wrote where train's model would go"

# --- 6. the README's docker run command --------------------------------------------------------
log "the README's docker run: IMAGE train ... on the penguin example, as 1000:1000"
[ -f "$EX/module.py" ] || die "examples/penguin/module.py is missing"
TRAIN_ARGS=(train --examples /penguin/data --schema /penguin/schema.pbtxt --module-file /penguin/module.py
            --model-dir /out/model --metrics-file /out/metrics.json --report-file /out/report.html
            --train-steps "${TRAIN_STEPS:-200}")
t0=$(now)
set +e
drun "${TRAIN_ARGS[@]}" 2>&1 | stamp "$t0" | tee "$WORK/train.log"
rc=${PIPESTATUS[0]}
set -e
T_TRAIN=$(secs "$t0" "$(now)")
[ "$rc" = 0 ] || die "training in the image exited with $rc (log: $WORK/train.log)"
first_line() { grep -m1 -E "^ *[0-9.]+ .*($1)" "$WORK/train.log" || true; }
STEP_LINE=$(first_line "$FIRST_STEP_RE")
[ -n "$STEP_LINE" ] || { echo "warning: no /$FIRST_STEP_RE/ line; using /$FALLBACK_STEP_RE/" >&2; STEP_LINE=$(first_line "$FALLBACK_STEP_RE"); }
T_FIRST_STEP=$(awk '{print $1}' <<<"$STEP_LINE")
FIRST_STEP_LINE=$(cut -c10- <<<"$STEP_LINE")
# The runtime also says how long after its own process start the step came.
T_FIRST_STEP_PROC=$(sed -n 's/.*(\([0-9.]*\) s after process start).*/\1/p' <<<"$STEP_LINE")

log "checking the model, metrics and report"
[ -f "$RUN_DIR/metrics.json" ] || die "no metrics file written"
[ -s "$RUN_DIR/report.html" ] || die "no report written"
[ -f "$RUN_DIR/model/Format-Serving/saved_model.pb" ] || die "no serving model written"
[ "$(stat -c %u "$RUN_DIR/model/Format-Serving/saved_model.pb")" = 1000 ] || die "the model is not owned by uid 1000"
# Load the published serving model in the image and classify eval examples with it.
drun python -c '
import glob, json
import tensorflow as tf
metrics = json.load(open("/out/metrics.json"))
print("metrics:", metrics)
assert metrics.get("accuracy", 0) > 0.6, "eval accuracy too low: %r" % metrics
path = "/out/model/Format-Serving"
model = tf.saved_model.load(path)
fn = model.signatures["serving_default"]
files = sorted(glob.glob("/penguin/data/Split-eval/*"))
records = [r.numpy() for r in tf.data.TFRecordDataset(files, compression_type="GZIP")]
labels = [tf.train.Example.FromString(r).features.feature["species"].int64_list.value[0] for r in records]
inputs = fn.structured_input_signature[1]
out = fn(**{next(iter(inputs)): tf.constant(records)})
probs = next(iter(out.values())).numpy()
assert probs.shape == (len(records), 3), probs.shape
assert abs(float(probs.sum(axis=1).mean()) - 1) < 1e-3, "outputs are not class probabilities"
accuracy = float((probs.argmax(axis=1) == labels).mean())
print("serving model %s: signatures %s; classified %d eval examples, accuracy %.3f"
      % (path, list(model.signatures), len(records), accuracy))
assert accuracy > 0.8, "the served model does not classify the eval split"
' 2>&1 | grep -v -E '(^WARNING: All log messages|^I0000|^E0000|^To enable the following instructions)' \
  | tee "$WORK/check.log"
[ "${PIPESTATUS[0]}" = 0 ] || die "model check failed"

log "heavy imports before the user's code runs (a module that imports nothing itself)"
# tensorflow-transform, Beam, kfp, the Google Cloud clients and keras-tuner must stay out of the
# start-up path unless the run uses them; the module reports what is loaded when run_fn starts.
cat >"$RUN_DIR/probe_module.py" <<'PROBE'
import json
import sys

HEAVY = ("tensorflow_transform", "tfx_bsl", "apache_beam", "kfp", "google.cloud.storage",
         "google.cloud.aiplatform", "keras_tuner", "tf_keras")


def run_fn(fn_args):
    print("HEAVY_AT_RUN_FN " + json.dumps(sorted(m for m in HEAVY if m in sys.modules)), flush=True)
    import keras
    inputs = keras.Input(shape=(1,), name="x")
    keras.Model(inputs, keras.layers.Dense(1)(inputs)).export(fn_args.serving_model_dir)
PROBE
HEAVY_LOADED=$(drun train --examples /penguin/data --module-file /out/probe_module.py \
                 --model-dir /out/probe-model 2>&1 | sed -n 's/^HEAVY_AT_RUN_FN //p')
echo "loaded when run_fn starts: ${HEAVY_LOADED:-?}"
[ "$HEAVY_LOADED" = "[]" ] || die "heavy modules in the start-up path: ${HEAVY_LOADED:-probe did not run}"

log "what each installed distribution costs in the image (MB, its files and their .pyc): $WORK/dist-sizes.txt"
docker run --rm -v "$ROOT/images/trainer/slim.py:/tmp/slim.py:ro" "$DOCKER_IMAGE" \
  python /tmp/slim.py sizes "$(drun python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')" \
  >"$WORK/dist-sizes.txt" || die "slim.py sizes failed in the image"
head -15 "$WORK/dist-sizes.txt"; tail -1 "$WORK/dist-sizes.txt"

# --- 7. the penguin pipeline under kfp.local's DockerRunner ------------------------------------
T_PIPELINE=
if [ "${SKIP_PIPELINE:-0}" != 1 ]; then
  log "the penguin pipeline with kfp.local.DockerRunner: every component in $DOCKER_IMAGE"
  KFP_ROOT="$WORK/kfp-docker"
  rm -rf "$KFP_ROOT"
  t=$(now)
  set +e
  (cd "$ROOT" && "$PY" images/trainer/docker_pipeline.py --image "$DOCKER_IMAGE" --pipeline-root "$KFP_ROOT" \
     --train-steps "${PIPELINE_TRAIN_STEPS:-100}" --max-trials 2) 2>&1 | stamp "$t" | tee "$WORK/pipeline.log"
  rc=${PIPESTATUS[0]}
  set -e
  T_PIPELINE=$(secs "$t" "$(now)")
  [ "$rc" = 0 ] || die "the DockerRunner pipeline exited with $rc (log: $WORK/pipeline.log)"
  echo "DockerRunner pipeline: $T_PIPELINE s"
fi

# --- 7b. TFX's mnist pipeline file, unedited, every step in the image ---------------------------
T_TFX_FILE=
if [ "${SKIP_TFX_FILE:-0}" != 1 ]; then
  log "TFX's mnist_pipeline_native_keras.py, unedited: tfx-pipeline run --docker-image $DOCKER_IMAGE"
  # The tfx 1.21.0 wheel (never installed: its example files, unpacked): TFX_ROOT, else downloaded.
  TFX_ROOT=${TFX_ROOT:-$WORK/tfx-wheel/root}
  if [ ! -f "$TFX_ROOT/tfx/examples/mnist/mnist_pipeline_native_keras.py" ]; then
    rm -rf "$WORK/tfx-wheel"
    "$PY" -m pip download -q --no-deps tfx==1.21.0 -d "$WORK/tfx-wheel" || die "pip download tfx==1.21.0 failed"
    "$PY" -c 'import glob, sys, zipfile
z = zipfile.ZipFile(glob.glob(sys.argv[1] + "/tfx-*.whl")[0])
z.extractall(sys.argv[1] + "/root", [n for n in z.namelist() if n.startswith("tfx/")])' "$WORK/tfx-wheel"
  fi
  MNIST="$TFX_ROOT/tfx/examples/mnist"
  # HOME as the file expects it: ~/mnist/data (made by examples/mnist/make_data.py: TFX's wheel has
  # no mnist data) and its two module files; it writes ~/tfx/pipelines and ~/mnist/serving_model.
  TFX_HOME="$WORK/tfx-home"
  rm -rf "$TFX_HOME"
  mkdir -p "$TFX_HOME/mnist"
  "$PY" "$ROOT/examples/mnist/make_data.py" "$TFX_HOME/mnist/data" --examples 600 >/dev/null \
    || die "examples/mnist/make_data.py failed"
  cp "$MNIST/mnist_utils_native_keras.py" "$MNIST/mnist_utils_native_keras_base.py" "$TFX_HOME/mnist/"
  t=$(now)
  set +e
  (cd "$WORK" && HOME="$TFX_HOME" "$PY" -m generic_trainer tfx-pipeline run --docker-image "$DOCKER_IMAGE" \
     "$MNIST/mnist_pipeline_native_keras.py") 2>&1 | stamp "$t" | tee "$WORK/tfx-file.log"
  rc=${PIPESTATUS[0]}
  set -e
  T_TFX_FILE=$(secs "$t" "$(now)")
  [ "$rc" = 0 ] || die "tfx-pipeline run --docker-image exited with $rc (log: $WORK/tfx-file.log)"
  sed 's/\x1b\[[0-9;]*m//g' "$WORK/tfx-file.log" >"$WORK/tfx-file.txt"  # kfp.local's colours out
  grep -q "Found image '$DOCKER_IMAGE" "$WORK/tfx-file.txt" || die "kfp.local did not run $DOCKER_IMAGE"
  for task in generic-import-examples generic-transform generic-trainer generic-evaluator generic-pusher; do
    grep -q "Task '$task' finished with status SUCCESS" "$WORK/tfx-file.txt" \
      || die "no successful $task task in $WORK/tfx-file.log"
  done
  SERVING="$TFX_HOME/mnist/serving_model/mnist_native_keras"
  VERSION=$(ls -d "$SERVING"/[0-9]* 2>/dev/null | sort | tail -1)
  [ -n "$VERSION" ] && [ -f "$VERSION/saved_model.pb" ] || die "no model pushed under $SERVING"
  [ "$(stat -c %u "$VERSION/saved_model.pb")" = "$(id -u)" ] || die "the pushed model is not owned by $(id -u)"
  EXAMPLES=$(ls -d "$TFX_HOME"/tfx/pipelines/mnist_native_keras/*/generic-import-examples/examples | head -1)
  # TF Serving's way: the newest version's serving_default, called with serialized tf.Examples.
  docker run --rm --user "$(id -u):$(id -g)" -e HOME=/tmp -v "$TFX_HOME:$TFX_HOME:ro" "$DOCKER_IMAGE" python -c '
import glob, sys
import tensorflow as tf
version, examples = sys.argv[1:3]
fn = tf.saved_model.load(version).signatures["serving_default"]
files = sorted(glob.glob(examples + "/Split-eval/*"))
records = list(tf.data.TFRecordDataset(files, compression_type="GZIP").take(8).as_numpy_iterator())
(key,) = fn.structured_input_signature[1].keys()
out = {k: v.shape.as_list() for k, v in fn(**{key: tf.constant(records)}).items()}
assert list(out.values()) == [[8, 10]], out
print("pushed model %s serves: %s" % (version, out))
' "$VERSION" "$EXAMPLES" 2>&1 | grep -v -E '(^WARNING: All log messages|^I0000|^E0000|^To enable the following)' \
    | tee "$WORK/tfx-file-check.log"
  [ "${PIPESTATUS[0]}" = 0 ] || die "the pushed mnist model does not load and serve"
  echo "TFX mnist pipeline file in docker: $T_TFX_FILE s"
fi

# --- 8. summary --------------------------------------------------------------------------------
T_TOTAL=$(secs "$T_START" "$(now)")
export IMAGE ACCELERATOR BASE_IMAGE IMAGE_BYTES BASE_BYTES T_BUILD T_NOOP T_HELP_IN T_FIRST_STEP T_FIRST_STEP_PROC \
       FIRST_STEP_LINE T_TRAIN T_TOTAL T_DOCKERD T_PUSH T_PIPELINE T_TFX_FILE
T_HELP_ALL="${T_HELP[*]}" python3 - "$WORK/summary.json" <<'SUMMARY'
import json, os, sys
e = os.environ
num = lambda k: float(e[k]) if e.get(k) else None
summary = {
    "image": e["IMAGE"], "accelerator": e["ACCELERATOR"], "base_image": e["BASE_IMAGE"],
    "image_bytes": int(e["IMAGE_BYTES"]), "base_bytes": int(e["BASE_BYTES"]),
    "build_seconds": num("T_BUILD"), "dockerd_start_seconds": num("T_DOCKERD"),
    "push_to_engine_seconds": num("T_PUSH"), "docker_run_true_seconds": num("T_NOOP"),
    "help_seconds": [float(x) for x in e["T_HELP_ALL"].split()],
    "help_in_container_seconds": num("T_HELP_IN"),
    "first_training_step_seconds": num("T_FIRST_STEP"),
    "first_training_step_after_process_start_seconds": num("T_FIRST_STEP_PROC"),
    "first_training_step_line": e.get("FIRST_STEP_LINE", ""),
    "train_run_seconds": num("T_TRAIN"), "docker_runner_pipeline_seconds": num("T_PIPELINE"),
    "tfx_pipeline_file_docker_seconds": num("T_TFX_FILE"),
    "smoke_seconds": num("T_TOTAL"),
}
with open(sys.argv[1], "w") as f:
    json.dump(summary, f, indent=2)
SUMMARY
log "summary ($WORK/summary.json)"
echo "image:                     $IMAGE (ACCELERATOR=$ACCELERATOR, base $BASE_IMAGE), in docker as $DOCKER_IMAGE"
echo "image size, uncompressed:  $IMAGE_MB MB (base $BASE_MB MB, added $(( (IMAGE_BYTES - BASE_BYTES) / 1000000 )) MB)"
echo "build:                     ${T_BUILD:-skipped} s"
echo "dockerd start:             ${T_DOCKERD:-already running} s; push into it: $T_PUSH s"
echo "docker run true:           $T_NOOP s"
echo "docker run IMAGE --help:   ${T_HELP[*]} s (inside the container: $T_HELP_IN s)"
echo "start -> first step:       ${T_FIRST_STEP:-?} s  (the runtime: ${T_FIRST_STEP_PROC:-?} s after its process start)"
echo "README docker run (train): $T_TRAIN s"
echo "DockerRunner pipeline:     ${T_PIPELINE:-skipped} s"
echo "TFX mnist file (--docker): ${T_TFX_FILE:-skipped} s"
echo "image test total:          $T_TOTAL s"
echo "smoke: OK"
