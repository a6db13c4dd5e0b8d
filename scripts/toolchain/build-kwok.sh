#!/usr/bin/env bash
# Builds kwok $KWOK_VERSION (sigs.k8s.io/kwok/cmd/kwok) into $1/bin: the tests' cluster's simulated nodes.
set -euo pipefail
. "$(dirname "$0")/prelude.sh"
begin_build "$1"
with_progress "build kwok $KWOK_VERSION" "$work/build.log" \
  env GOBIN="$work/out/bin" go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
finish_build
