# Sourced by scripts/bootstrap and the build scripts: run a long command with a heartbeat, so a cold build never
# looks hung. with_progress LABEL LOGFILE CMD...
# The command's output goes to LOGFILE; the terminal gets one line every 30 s. Under scripts/bootstrap the line
# also names the piece being built, its expected cold time and how long the piece has taken so far
# (SSH_GATEWAY_PIECE, SSH_GATEWAY_PIECE_COLD, SSH_GATEWAY_PIECE_START, exported by the bootstrap).

# 95 -> 1m35s
duration() {
  local s=$1
  if [ "$s" -ge 60 ]; then printf '%dm%02ds' $((s / 60)) $((s % 60)); else printf '%ds' "$s"; fi
}

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
      if [ -n "${SSH_GATEWAY_PIECE:-}" ]; then
        echo "    ... piece $SSH_GATEWAY_PIECE: $(duration $((EPOCHSECONDS - SSH_GATEWAY_PIECE_START))) so far" \
          "(cold: ~$SSH_GATEWAY_PIECE_COLD); $label: $(duration $((SECONDS - start)))"
      else
        echo "    ... $label: $(duration $((SECONDS - start)))"
      fi
      next=$((next + 30))
    fi
  done
  if ! wait "$pid"; then
    echo "!!! $label failed after $(duration $((SECONDS - start))); last lines of $log:" >&2
    tail -n 30 "$log" >&2
    return 1
  fi
  echo "    $label done in $(duration $((SECONDS - start)))"
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

# The wrapper module of a build whose main package `go install …@version` refuses (its module has replace
# directives) or cannot import: $work/go.mod, the module example.invalid/NAME-toolchain at go GO_VERSION with the
# directives read from stdin (its require and replace lines), and $work/tools.go, which imports each PACKAGE
# under the `tools` tag, so that `go mod tidy` resolves them as the required modules' own go.mod files say.
# wrapper_module NAME GO_VERSION PACKAGE... <<MOD
# require example.org/module vX.Y.Z
# MOD
wrapper_module() {
  local name=$1 go_version=$2 package
  shift 2
  { printf 'module example.invalid/%s-toolchain\n\ngo %s\n\n' "$name" "$go_version"; cat; } > "$work/go.mod"
  {
    printf '//go:build tools\n\npackage tools\n\nimport (\n'
    for package in "$@"; do printf '\t_ "%s"\n' "$package"; done
    printf ')\n'
  } > "$work/tools.go"
}
