#!/usr/bin/env bash
# Builds Horovod from its PyPI source against the torch (and TensorFlow, when installed) of the
# active Python, caches the wheel outside the repository, and installs it. docs/horovod.md.
#
#   .ci/horovod.sh                    build if not cached, then pip install the wheel
#   .ci/horovod.sh --path             build if not cached, print the cache folder holding it
#   .ci/horovod.sh --wheelhouse [DIR] build if not cached, print a wheelhouse for
#                                     `launchbay images build --wheelhouse`: links to the
#                                     horovod wheel and to the wheels in DIR (torch's)
#
# The cache folder is keyed by what the wheel's native libraries were compiled against:
#   ${LAUNCHBAY_WHEEL_CACHE:-$HOME/.cache/launchbay/wheels}/horovod-<v>-torch<v>[-tf<v>]-cp<XY>/
# so a fresh clone on the same machine (CI) reuses it and a framework upgrade rebuilds it.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
version="${HOROVOD_VERSION:-0.28.1}"
patch_file="$here/patches/horovod-$version.patch"
mode="${1:-install}"

# Versions the wheel is compiled against; TensorFlow is optional (HOROVOD_NO_TF=1 leaves it out).
read -r torch_v tf_v py_tag < <(python - <<'PY'
import importlib.metadata as md, os, sys
def v(name):
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return "-"
tf = "-" if os.environ.get("HOROVOD_NO_TF") == "1" else v("tensorflow-cpu")
if tf == "-" and os.environ.get("HOROVOD_NO_TF") != "1":
    tf = v("tensorflow")
print(v("torch"), tf, f"cp{sys.version_info[0]}{sys.version_info[1]}")
PY
)
if [ "$torch_v" = "-" ]; then
  echo "horovod.sh: torch is not installed in $(command -v python); install it first" >&2
  exit 1
fi
key="horovod-$version-torch$torch_v"
[ "$tf_v" != "-" ] && key="$key-tf$tf_v"
key="$key-$py_tag"
cache_root="${LAUNCHBAY_WHEEL_CACHE:-$HOME/.cache/launchbay/wheels}"
cache="$cache_root/$key"

if ! compgen -G "$cache/horovod-$version-*.whl" >/dev/null; then
  # Build tools: cmake and a C++17 compiler; OpenMPI's headers for the MPI controller.
  for tool in cmake g++ make patch mpicxx; do
    if ! command -v "$tool" >/dev/null; then
      export DEBIAN_FRONTEND=noninteractive
      apt-get update -qq
      apt-get install -y -qq cmake g++ make patch libopenmpi-dev openmpi-bin >/dev/null
      break
    fi
  done
  # Horovod's setup.py imports these at build time; --no-build-isolation builds against the
  # venv's torch and TensorFlow instead of a fresh isolated copy of them.
  python -m pip install --quiet cffi cloudpickle psutil pyyaml packaging wheel setuptools
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
  python -m pip download --quiet --no-binary :all: --no-deps -d "$work" "horovod==$version"
  tar -xzf "$work/horovod-$version.tar.gz" -C "$work"
  patch -d "$work/horovod-$version" -p1 --quiet <"$patch_file"
  export HOROVOD_WITH_PYTORCH=1 HOROVOD_WITH_GLOO=1 HOROVOD_WITH_MPI=1 HOROVOD_WITHOUT_MXNET=1
  if [ "$tf_v" != "-" ]; then
    export HOROVOD_WITH_TENSORFLOW=1
  else
    export HOROVOD_WITHOUT_TENSORFLOW=1
  fi
  export MAKEFLAGS="${MAKEFLAGS:--j$(nproc)}"
  echo "== building horovod $version ($key), several minutes; log: $work/build.log" >&2
  start=$(date +%s)
  if ! nice python -m pip wheel --no-build-isolation --no-deps -w "$work/dist" \
      "$work/horovod-$version" >"$work/build.log" 2>&1; then
    grep -n -m 5 -E "error|Error" "$work/build.log" >&2 || true
    tail -n 40 "$work/build.log" >&2
    trap - EXIT
    echo "horovod.sh: the build failed; the sources and log are kept in $work" >&2
    exit 1
  fi
  echo "== horovod built in $(( $(date +%s) - start )) s" >&2
  mkdir -p "$cache_root"
  # Publish atomically: a concurrent run never sees a half-copied wheel.
  tmp_cache="$(mktemp -d "$cache_root/.tmp.XXXXXX")"
  chmod 755 "$tmp_cache"
  cp "$work"/dist/horovod-*.whl "$tmp_cache/"
  if ! mv -T "$tmp_cache" "$cache" 2>/dev/null; then
    rm -rf "$tmp_cache"
  fi
fi

if [ "$mode" = "--path" ]; then
  echo "$cache"
elif [ "$mode" = "--wheelhouse" ]; then
  # One folder per (key, DIR), made of links: the image build copies the files they point
  # to, and its context hash sees the same names and contents on every run.
  source_dir="${2:-}"
  tag="$(printf '%s' "$source_dir" | sha256sum | cut -c1-12)"
  house="$cache_root/wheelhouse/$key-$tag"
  mkdir -p "$house"
  ln -sfn "$cache"/horovod-"$version"-*.whl "$house/"
  if [ -n "$source_dir" ]; then
    for wheel in "$source_dir"/*.whl; do
      [ -e "$wheel" ] && ln -sfn "$(cd "$(dirname "$wheel")" && pwd)/$(basename "$wheel")" "$house/"
    done
  fi
  echo "$house"
else
  python -m pip install --quiet --no-deps "$cache"/horovod-"$version"-*.whl
  python -m pip install --quiet cffi cloudpickle psutil pyyaml packaging
fi
