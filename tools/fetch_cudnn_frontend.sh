#!/usr/bin/env bash
# Fetch cudnn-frontend's C++ headers (header-only; the PyPI wheel nvidia-cudnn-frontend ships
# them under include/) into ./.cudnn-frontend/include, for the cuDNN backend:
#   ./tools/fetch_cudnn_frontend.sh && NORMTUNE_CMAKE_ARGS="-DNORMTUNE_CUDNN_FRONTEND_INCLUDE=$PWD/.cudnn-frontend/include" ./tools/build.sh
#   CUDNN_FRONTEND_VERSION  the release (default 1.16.0)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest="$root/.cudnn-frontend"
version="${CUDNN_FRONTEND_VERSION:-1.16.0}"
if [ -f "$dest/include/cudnn_frontend.h" ] && [ "$(cat "$dest/VERSION" 2>/dev/null)" = "$version" ]; then
  echo "$dest/include"
  exit 0
fi
rm -rf "$dest"
mkdir -p "$dest/wheel"
# (Any of its wheels has the same headers: take the CPython 3.11 x86-64 one whatever runs here.)
python3 -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
  --python-version 3.11 --platform manylinux_2_28_x86_64 -d "$dest/wheel" \
  "nvidia-cudnn-frontend==$version" >&2
python3 - "$dest" <<'PY'
import glob, sys, zipfile
dest = sys.argv[1]
wheel = glob.glob(dest + "/wheel/*.whl")[0]
with zipfile.ZipFile(wheel) as z:
    for name in z.namelist():
        if name.startswith("include/"):
            z.extract(name, dest)
PY
rm -rf "$dest/wheel"
echo "$version" > "$dest/VERSION"
echo "$dest/include"
