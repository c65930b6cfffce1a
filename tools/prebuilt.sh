#!/usr/bin/env bash
# Builds here, on a machine without a GPU, what the GPU machine would otherwise build, and packs
# it to travel there (the device tool's `carry`), so that its device time goes to running:
# its builds took 100-200 s of each session's 1800 (gpu_check.sh's whole build, ab.sh's CLI per
# side). The GPU machine's copy of the tree lies at the same path as this one (/work/main), so
# the binaries' library paths and ctest's files hold there as they are.
#   tools/prebuilt.sh pack [suite|cli]  here: configures and builds build-gpu as gpu_check.sh
#                                       does (Release, sm_90), with the cuDNN backend
#                                       (tools/fetch_cudnn_frontend.sh), and packs what running
#                                       needs into .prebuilt/build-gpu.tar.xz: suite (default)
#                                       the library, the CLI, every test and ctest's files
#                                       (~20 MiB); cli the library and the CLI (~18 MiB)
#   tools/prebuilt.sh pack-ab           here: the CLI of ab_base (unless `ab.sh prepare tree`)
#                                       and of every ab_var/NAME, as ab.sh run builds them
#                                       (build-ab-base, build-ab-var-NAME), one archive each;
#                                       the tree's own: kept when a fresh suite is there
#   tools/prebuilt.sh unpack SRC BUILD suite|cli
#                                       on the GPU machine (gpu_check.sh and ab.sh call it):
#                                       when .prebuilt/BUILD.tar.xz holds that much for BUILD
#                                       and every build input of SRC is the one it was built
#                                       from (a sha256 manifest), unpacks it beside BUILD, runs
#                                       its CLI once (the library resolves) and puts it in
#                                       BUILD's place; exits 1, BUILD untouched, when there is
#                                       no archive, it is stale or short, or the CLI does not
#                                       run: the caller builds there as before.
#   tools/prebuilt.sh carry-plan [PATH...]
#                                       here: when the archives in .prebuilt and the tree
#                                       exceed one call's 64 MiB, which travel in which call:
#                                       staging calls first, each running `tools/prebuilt.sh
#                                       stage`, then the final call, which carries PATH... too
#                                       (ab_base, ab_var, ...) and runs the real command; the
#                                       calls must follow each other (the GPU machine keeps
#                                       /tmp only while warm, 30 s after a call)
#   tools/prebuilt.sh stage             on the GPU machine: copies the carried archives of
#                                       .prebuilt into $NORMTUNE_PREBUILT_STAGED (default
#                                       /tmp/normtune-prebuilt), where `unpack` looks for an
#                                       archive that .prebuilt lacks
# carry: [".prebuilt"] with the usual paths (64 MiB in all: the suite and one ab side fit).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
store="$root/.prebuilt"
staged="${NORMTUNE_PREBUILT_STAGED:-/tmp/normtune-prebuilt}"
export PATH="/usr/local/cuda/bin:$PATH"

# The source files of SRC, relative to it, NUL-separated, for the manifest (prebuilt.py keeps
# those a build reads): git's tracked and unignored files for the tree itself; every file of an
# ab_base / ab_var copy. (On the GPU machine, which may have no git, prebuilt.py walks SRC.)
sources() {
  if [[ "$1" == "$root" ]]; then
    git -C "$root" ls-files -z -co --exclude-standard
  else
    (cd "$1" && find . -type f ! -name '.ab_*' -printf '%P\0')
  fi
}

# pack_build SRC BUILD TARGET: configure and build BUILD from SRC, then the archive.
pack_build() {
  local src="$1" build="$2" target="$3" name log cudnn start
  name="$(basename "$build")"
  log="$store/$name.build.log"
  mkdir -p "$store"
  cudnn="$("$root/tools/fetch_cudnn_frontend.sh")"
  echo "prebuilt: building $name from $([[ "$src" == "$root" ]] && echo "this tree" || echo "${src#"$root"/}") ($target; log $log)"
  # (The manifest first: a file edited during the build makes the archive stale, not wrong.
  # The tools' self-tests run python3 by name: ctest finds it on the GPU machine's PATH.)
  sources "$src" | python3 "$root/tools/prebuilt.py" manifest "$src" "$store/$name.manifest.json"
  start=$(date +%s)
  local args=()
  [[ "$target" == cli ]] && args=(--target normtune_cli)
  if ! { cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DNORMTUNE_CUDA_ARCHS=90 \
           -DNORMTUNE_ENABLE_CUDNN=ON -DNORMTUNE_CUDNN_FRONTEND_INCLUDE="$cudnn" \
           -DNORMTUNE_TEST_PYTHON=python3 >"$log" 2>&1 &&
         cmake --build "$build" --parallel "$(nproc)" "${args[@]}" >>"$log" 2>&1; }; then
    grep -E "error" "$log" | head -20
    exit 1
  fi
  # ctest's lists of each test binary's tests, written here (gtest discovery would otherwise
  # run on the GPU machine through this machine's CMake module path).
  [[ "$target" == suite ]] && ctest --test-dir "$build" -N >/dev/null
  echo "prebuilt: built in $(( $(date +%s) - start )) s"
  python3 "$root/tools/prebuilt.py" pack "$src" "$build" "$target" "$store/$name.tar.xz" "$store/$name.manifest.json"
  rm -f "$store/$name.manifest.json"
}

case "${1:-}" in
  pack)
    target="${2:-suite}"
    [[ "$target" == suite || "$target" == cli ]] || { echo "usage: tools/prebuilt.sh pack [suite|cli]" >&2; exit 1; }
    pack_build "$root" "$root/build-gpu" "$target"
    ;;
  pack-ab)
    [[ -d "$root/ab_base" ]] || { echo "prebuilt: no ./ab_base (tools/ab.sh prepare REV|tree first)" >&2; exit 1; }
    [[ -f "$root/ab_base/.ab_is_tree" ]] || pack_build "$root/ab_base" "$root/build-ab-base" cli
    # The tree's CLI: a fresh archive of it (a suite holds it) is kept, not replaced.
    if [[ -f "$store/build-gpu.tar.xz" ]] &&
       python3 "$root/tools/prebuilt.py" check "$root" "$root/build-gpu" "$store/build-gpu.tar.xz" cli; then
      echo "prebuilt: build-gpu.tar.xz is fresh: kept"
    else
      pack_build "$root" "$root/build-gpu" cli
    fi
    for dir in "$root"/ab_var/*/; do
      [[ -d "$dir" ]] || continue
      pack_build "${dir%/}" "$root/build-ab-var-$(basename "$dir")" cli
    done
    ;;
  unpack)
    usage="usage: tools/prebuilt.sh unpack SRC BUILD suite|cli"
    src="${2:?$usage}"
    build="${3:?$usage}"
    need="${4:?$usage}"
    archive="$store/$(basename "$build").tar.xz"
    [[ -f "$archive" ]] || archive="$staged/$(basename "$build").tar.xz"
    [[ -f "$archive" ]] || exit 1
    python3 "$root/tools/prebuilt.py" unpack "$src" "$build" "$archive" "$need"
    ;;
  stage)
    mkdir -p "$staged"
    shopt -s nullglob
    archives=("$store"/*.tar.xz)
    (( ${#archives[@]} )) || { echo "prebuilt: no archive in .prebuilt to stage (carry them)" >&2; exit 1; }
    cp "${archives[@]}" "$staged/"
    echo "prebuilt: staged in $staged: $(cd "$staged" && ls -- *.tar.xz | tr '\n' ' ')"
    ;;
  carry-plan)
    shift
    limit=$(( 63 * 1024 * 1024 ))  # (the device tool's 64 MiB, less a margin for what git lists late)
    tree=$(git -C "$root" ls-files -z -co --exclude-standard | (cd "$root" && xargs -0 stat -c %s 2>/dev/null) |
           awk '{ n += $1 } END { print n + 0 }')
    final=0
    (( $# )) && final=$(cd "$root" && du -sb "$@" | awk '{ n += $1 } END { print n + 0 }')
    args=()
    shopt -s nullglob
    for a in "$store"/*.tar.xz; do args+=("$(basename "$a")=$(stat -c %s "$a")"); done
    (( ${#args[@]} )) || { echo "prebuilt: no archive in .prebuilt" >&2; exit 1; }
    mapfile -t calls < <(python3 "$root/tools/prebuilt.py" carry-plan "$limit" "$tree" "$final" "${args[@]}")
    (( ${#calls[@]} )) || exit 1
    quoted() { local out="" x; for x in "$@"; do out+="${out:+, }\"$x\""; done; echo "[$out]"; }
    for i in "${!calls[@]}"; do
      read -ra names <<<"${calls[$i]}"
      paths=()
      for n in "${names[@]}"; do paths+=(".prebuilt/$n"); done
      if (( i + 1 < ${#calls[@]} )); then
        echo "call $(( i + 1 )) (staging): carry $(quoted "${paths[@]}"), command: tools/prebuilt.sh stage"
      else
        echo "call $(( i + 1 )): carry $(quoted "$@" "${paths[@]}"), command: yours (unpack finds the staged archives)"
      fi
    done
    echo "(the tree: $(( tree / 1048576 )) MiB in every call; the calls one right after the other)"
    ;;
  *)
    echo "usage: tools/prebuilt.sh pack [suite|cli] | pack-ab | unpack SRC BUILD suite|cli | carry-plan [PATH...] | stage" >&2
    exit 1
    ;;
esac
