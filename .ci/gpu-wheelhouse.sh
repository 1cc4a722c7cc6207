#!/usr/bin/env bash
# The wheelhouse of the GPU PyTorch image built FROM a plain Debian base (docs/images.md, "GPU
# image without the CUDA base"): the CUDA build of torch and every wheel it needs, its CUDA
# runtime libraries as nvidia-* wheels, downloaded once with pip into a folder outside the
# repository and printed on stdout for `launchbay images build --wheelhouse`.
#
#   .ci/gpu-wheelhouse.sh [TORCH_VERSION]     default 2.14.1
#
# pip takes the files from its configured find-links and indexes first (on these machines
# /opt/wheels, /opt/pypi and /opt/pypi-more hold torch 2.14.1's CUDA wheel and its nvidia-*
# wheels: about 2.9 GB), the few missing ones from PyPI (about 60 MB). A folder that holds
# them already is reused: pip re-downloads nothing and the files keep their mtimes, so the
# image's context hash (and --reuse) stays the same.
# ${LAUNCHBAY_WHEEL_CACHE:-$HOME/.cache/launchbay/wheels}/gpu-torch-<v>-cp<XY>/
set -euo pipefail
torch_v="${1:-2.14.1}"
python="${PYTHON:-python}"
py_tag=$("$python" -c 'import sys; print("cp%d%d" % sys.version_info[:2])')
dir="${LAUNCHBAY_WHEEL_CACHE:-$HOME/.cache/launchbay/wheels}/gpu-torch-$torch_v-$py_tag"
mkdir -p "$dir"
if [ ! -f "$dir/.complete" ]; then
  # --only-binary: wheels only, nothing compiled; numpy beside torch as the Dockerfile installs it.
  "$python" -m pip download -qq --disable-pip-version-check --only-binary=:all: \
    -d "$dir" "torch==$torch_v" numpy >&2
  if ! compgen -G "$dir/torch-$torch_v-*.whl" >/dev/null \
    || ! compgen -G "$dir/nvidia_cuda_runtime-*.whl" >/dev/null; then
    echo "gpu-wheelhouse.sh: $dir holds no CUDA build of torch $torch_v (torch and nvidia-cuda-runtime wheels)" >&2
    exit 1
  fi
  touch "$dir/.complete"
fi
echo "$dir"
