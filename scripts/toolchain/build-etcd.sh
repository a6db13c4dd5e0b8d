#!/usr/bin/env bash
# Builds etcd $ETCD_VERSION into $1/bin, for the tests' control plane (ssh_gateway/local/control_plane.py).
# server/go.mod replaces its sibling modules with ../ paths, so `go install …@version` refuses it; every
# sibling is tagged and server/go.mod already requires them at the same version, so a throwaway wrapper
# that requires only the server module builds exactly the release (upstream scripts/build_lib.sh: CGO off).
# etcd's version is a constant in api/v3/version; upstream's only ldflag is the commit (GitSHA), which a module
# zip does not carry, so `etcd --version` says "Git SHA: Not provided". Its own wrapper, not kube-apiserver's,
# so MVS never mixes the two's etcd client versions.
set -euo pipefail
. "$(dirname "$0")/prelude.sh"
begin_build "$1"

cd "$work"
wrapper_module etcd 1.26 go.etcd.io/etcd/server/v3 <<MOD
require go.etcd.io/etcd/server/v3 v$ETCD_VERSION
MOD
with_progress "resolve etcd v$ETCD_VERSION modules" "$work/tidy.log" go mod tidy
with_progress "build etcd v$ETCD_VERSION" "$work/build.log" \
  go build -trimpath -buildvcs=false -ldflags "-s -w" -o "$work/out/bin/etcd" go.etcd.io/etcd/server/v3

finish_build
