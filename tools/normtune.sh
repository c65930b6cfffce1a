#!/usr/bin/env bash
# Build normtune if needed, then run the normtune tool: ./tools/normtune.sh <command> [options]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/tools/build.sh" >&2
exec "${NORMTUNE_BUILD_DIR:-$root/build}/tools/normtune" "$@"
