# Sourced by the scripts: common paths. Not meant to be run.
AIJP_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
AIJP_BUILD="${AIJP_BUILD_DIR:-$AIJP_ROOT/build}"
case ":$PATH:" in *":/usr/local/cuda/bin:"*) ;; *) [ -d /usr/local/cuda/bin ] && export PATH="$PATH:/usr/local/cuda/bin" ;; esac
AIJP_SHARED="${AIJP_SHARED_DIR:-$(cd "$AIJP_ROOT/.." && pwd)/shared}"
