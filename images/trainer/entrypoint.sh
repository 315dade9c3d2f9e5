#!/bin/sh
# The trainer image's ENTRYPOINT: runs the container's arguments both ways they arrive.
#
# - Kubernetes / KFP on a cluster / Vertex AI replace the entrypoint with the component's `command`
#   (`generic-trainer`): this script is not run at all.
# - `docker run IMAGE train ...` and kfp.local's DockerRunner append their arguments after the
#   ENTRYPOINT. DockerRunner passes the component's whole command line (`generic-trainer train ...`),
#   a user passes the CLI's own (`train ...`, `--help`).
#
# So: a generic-trainer verb or an option is prefixed with `generic-trainer`; anything else that is
# an executable command on PATH (`generic-trainer`, `python`, `sh`, an absolute path) runs as given;
# the rest goes to generic-trainer too, whose error names the accepted verbs. Always `exec`: the
# program is PID 1 and receives the container's signals (SIGTERM on preemption) itself.
set -eu

# The verbs of `generic-trainer` (tests/test_image_entrypoint.py keeps this list equal to the CLI's).
VERBS="train tune evaluate infra-validate import-examples transform push doctor vertex-job export-tflite bulk-infer resolve tfx-pipeline"
TRAINER=generic-trainer

if [ "$#" -eq 0 ]; then
  exec "$TRAINER" --help
fi
case "$1" in
  -*) exec "$TRAINER" "$@" ;;
esac
for verb in $VERBS; do
  if [ "$1" = "$verb" ]; then
    exec "$TRAINER" "$@"
  fi
done
if command -v -- "$1" >/dev/null 2>&1; then
  exec "$@"
fi
exec "$TRAINER" "$@"
