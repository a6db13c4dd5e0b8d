# Sourced by the build scripts: run a long command with a heartbeat, so a cold build never looks hung.
# with_progress LABEL LOGFILE CMD...
with_progress() {
  local label=$1 log=$2; shift 2
  local start=$SECONDS
  echo "==> $label (log: $log)"
  "$@" >"$log" 2>&1 &
  local pid=$!
  local next=$((start + 30))
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1
    if [ "$SECONDS" -ge "$next" ]; then
      echo "    ... $label: $((SECONDS - start))s"
      next=$((next + 30))
    fi
  done
  if ! wait "$pid"; then
    echo "!!! $label failed after $((SECONDS - start))s; last lines of $log:" >&2
    tail -n 30 "$log" >&2
    return 1
  fi
  echo "    $label done in $((SECONDS - start))s"
}

# The frame every build-*.sh shares: a scratch dir that is always removed (module-cache copies are
# read-only), Go pinned to the local toolchain with CGO off as upstream releases build, and an atomic
# move of $work/out into the cache dir, so a half-built piece is never taken for a cached one.
# begin_build DEST
begin_build() {
  dest=$1
  work=$(mktemp -d)
  trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
  export GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=0
  mkdir -p "$work/out/bin"
}

finish_build() {
  mkdir -p "$(dirname "$dest")"
  rm -rf "$dest.tmp" && mv "$work/out" "$dest.tmp" && rm -rf "$dest" && mv "$dest.tmp" "$dest"
}
