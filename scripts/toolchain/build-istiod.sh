#!/usr/bin/env bash
# Builds istiod (`pilot-discovery`, istio.io/istio/pilot/cmd/pilot-discovery) at istio.io/istio
# $ISTIO_MODULE_VERSION into $1/bin, for the tests' istiod-fed gateway (ssh_gateway/local/istiod.py):
#   build-istiod.sh DEST
# A throwaway wrapper that requires only istio.io/istio, like the istio-envoyfilter helper's module: MVS over
# Istio's go.mod picks exactly its dependency versions in both, and with the same flags (-trimpath, CGO off)
# every package the two share comes out of the Go build cache the helper filled.
# The module proxy here serves istio.io/istio at this one pseudo-version only (tags, branches such as
# release-1.32 and other commits are refused), so istiod is the 1.31 development line of the helper, not 1.32.
set -euo pipefail
. "$(dirname "$0")/prelude.sh"
begin_build "$1"

cd "$work"
# pilot-discovery's main package imports these two; a main package cannot be imported, so these stand in for it in tidy.
wrapper_module istiod 1.26.0 \
  github.com/KimMachineGun/automemlimit istio.io/istio/pilot/cmd/pilot-discovery/app <<MOD
require istio.io/istio $ISTIO_MODULE_VERSION
MOD
with_progress "resolve istio.io/istio $ISTIO_MODULE_VERSION modules" "$work/tidy.log" go mod tidy
# No version ldflags: upstream stamps a release tag, and this source has none (istiod reports "unknown").
with_progress "build pilot-discovery" "$work/build.log" \
  go build -trimpath -buildvcs=false -ldflags "-s -w" -o "$work/out/bin/pilot-discovery" \
    istio.io/istio/pilot/cmd/pilot-discovery

finish_build
