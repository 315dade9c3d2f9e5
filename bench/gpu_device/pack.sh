#!/bin/bash
# Carry TensorFlow 2.21 and its CUDA 12 libraries to a lent GPU machine that has neither (no
# network, Python 3.12, PyTorch's CUDA 13): the steps one session ran on 2026-11-27 for the H200
# figures of bench/README.md ("GPU bench"), collected here; this file itself was not rerun end
# to end.
# Run from the repository the device tool sends (its checkout); SRC needs `make install`'s .venv
# (elf.py strip runs with it). Everything goes under .gpu/, which must be
# ignored (`echo /.gpu/ >> .git/info/exclude`); nothing of it is committed.
#   bash bench/gpu_device/pack.sh [SRC]    # SRC: the worktree whose runtime/ and bench/ travel
# Then, one device call per chunk, back to back (a machine stays warm 30 s):
#   run(carry=[".gpu/chunks/all.00"], command="mkdir -p /tmp/ch && mv .gpu/chunks/* /tmp/ch/")
#   run(carry=[".gpu/chunks/all.NN", ".gpu/tree", ".gpu/zbin", ".gpu/device.sh"],
#       command="bash .gpu/device.sh --quick")     # the last chunk: unpack, doctor, bench/gpu.py
# Each call carries at most 64 MiB with the checkout itself: CHUNK leaves room for it. Seen: a
# call that does not name .gpu/tree, .gpu/zbin and .gpu/device.sh in carry finds them gone, while
# /tmp (the chunks, the unpacked tree) stays as long as the machine stays warm; a rerun then is
#   run(carry=[".gpu/tree", ".gpu/zbin", ".gpu/device.sh"], command="bash .gpu/device.sh ...")
set -euo pipefail
SRC=${1:-$PWD}; G=$PWD/.gpu; CHUNK=${CHUNK:-62700000}
PLAT=(--only-binary=:all: --python-version 3.12 --implementation cp)
for p in manylinux_2_28 manylinux_2_27 manylinux_2_24 manylinux_2_17 manylinux2014 manylinux_2_5 \
  manylinux1; do PLAT+=(--platform "${p}_x86_64"); done
pin() { grep -h -i -E "^($(echo "$@" | tr ' ' '|'))==" "$SRC"/requirements/runtime.lock; }
mkdir -p "$G"/whl "$G"/pywhl
# 1. TensorFlow and cuda.lock's libraries (2.5 GB of wheels), installed and slimmed (4.2 GB; 755 MB
#    compressed)
python3 -m pip download -q --no-deps "${PLAT[@]}" -d "$G"/whl tensorflow==2.21.0 \
  $(grep '^nvidia-' "$SRC"/images/trainer/cuda.lock)
python3 -m pip install -q --no-deps --no-compile "${PLAT[@]}" --target "$G"/site "$G"/whl/*.whl
find "$G"/site -name '*.a' -delete
find "$G"/site -type d -name include -prune -exec rm -rf {} +
python3 "$SRC"/bench/gpu_device/fatbin_zero.py "$G"/site
PYTHONPATH="$SRC"/runtime "$SRC"/.venv/bin/python "$SRC"/images/trainer/elf.py strip "$G"/site
# 2. the rest of what train, doctor and the bench import (traced with a sitecustomize that listed
#    sys.modules at exit, then mapped to distributions), at runtime.lock's versions; pyarrow and
#    scipy left out (pandas and tensorflow.python.keras only try to import them)
python3 -m pip download -q --no-deps "${PLAT[@]}" -d "$G"/pywhl nvidia-ml-py==13.615.71 \
  $(pin pyyaml pygments absl-py asttokens astunparse certifi charset-normalizer cloudpickle \
    colorama decorator defusedxml dill executing flatbuffers gast google-api-core \
    google-api-python-client google-auth google-auth-httplib2 google-crc32c \
    googleapis-common-protos h5py httplib2 idna ipython jedi keras ml-dtypes namex numpy \
    oauth2client opt-einsum optree packaging pandas parso pillow prompt-toolkit protobuf \
    pure-eval pyasn1 pyasn1-modules pydot pyparsing python-dateutil pytz requests rich rsa \
    setuptools six stack-data tensorboard tensorflow-metadata termcolor tf-keras traitlets \
    typing-extensions uritemplate urllib3 wcwidth wrapt markdown-it-py mdurl)
python3 -m pip install -q --no-deps --no-compile "${PLAT[@]}" --target "$G"/pysite "$G"/pywhl/*.whl
find "$G"/pysite -type d -name tests -prune -exec rm -rf {} +
# 3. one stream (zstd frames of two tars: the device unpacks with tar -i), in chunks
tar -C "$G"/site -cf - . | zstd -12 --long=27 -T0 -q -o "$G"/big.tar.zst
tar -C "$G"/pysite -cf - . | zstd -12 --long=27 -T0 -q -o "$G"/py.tar.zst
mkdir -p "$G"/chunks
cat "$G"/big.tar.zst "$G"/py.tar.zst | split -b "$CHUNK" -d -a 2 - "$G"/chunks/all.
# 4. what the last call carries: zstd (the device has none) with its libraries, runtime/ and bench/
#    with the data of bench/overhead.py generated here (ensure_data(50000)), device.sh
mkdir -p "$G"/zbin "$G"/tree/bench/_work/overhead
cp /usr/bin/zstd "$(ldd /usr/bin/zstd | awk '/libz\.|liblzma|liblz4/ {print $3}')" "$G"/zbin/
(cd "$SRC" && git ls-files bench runtime | tar -cf - -T -) | tar -C "$G"/tree -xf -
cp -r "$SRC"/bench/_work/overhead/penguin-50000 "$G"/tree/bench/_work/overhead/
cp "$SRC"/bench/gpu_device/device.sh "$G"/device.sh
ls -la "$G"/chunks
