#!/usr/bin/env bash
# Builds the commands named after DEST (kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, ...) of
# k8s.io/kubernetes v$K8S_VERSION into DEST/bin, in one `go build`, so they share one module download and one build
# cache: the tests' cluster (ssh_gateway/local/control_plane.py). Usage: build-kubernetes-binaries.sh DEST CMD...
# k8s.io/kubernetes requires every staging module (k8s.io/api,
# client-go, ...) at v0.0.0 and replaces it with ./staging/src/..., which is not in the module zip: a
# wrapper module replaces each one with its tagged release v0.<minor>.<patch>, the list generated from the
# downloaded go.mod itself so a new staging module cannot be missed (kubernetes/kubernetes#80316).
# The version ldflags are those of upstream's hack/lib/version.sh; without them the server reports
# v0.0.0-master and pulumi-kubernetes refuses it ("minimum supported cluster version is v1.13. found v0.0").
set -euo pipefail
. "$(dirname "$0")/prelude.sh"
begin_build "$1"
shift
commands=("$@")
packages=()
for cmd in "${commands[@]}"; do packages+=("k8s.io/kubernetes/cmd/$cmd"); done

version=v$K8S_VERSION
staging=v0.${K8S_VERSION#1.}
cd "$work"
wrapper_module kubernetes 1.26 "${packages[@]}" <<MOD
require k8s.io/kubernetes $version
MOD
upstream_mod=$(go mod download -json "k8s.io/kubernetes@$version" \
  | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d.get("GoMod") or sys.exit(d.get("Error")))')
modules=$(grep -oE '^\s*k8s\.io/[a-z0-9-]+ => \./staging/' "$upstream_mod" | awk '{print $1}')
[ -n "$modules" ] || { echo "build-kubernetes-binaries: no staging replaces found in $upstream_mod" >&2; exit 1; }
for m in $modules; do go mod edit "-replace=$m=$m@$staging"; done
echo "==> kubernetes $version: $(echo "$modules" | wc -l) staging modules pinned at $staging"
with_progress "resolve kubernetes $version modules" "$work/tidy.log" go mod tidy

released=$(go list -m -f '{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}' "k8s.io/kubernetes")
minor=$(echo "$K8S_VERSION" | cut -d. -f2)
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$released"
done
# One `go build -o DIR/` of every package: the packages they share compile once.
with_progress "build ${commands[*]} $version" "$work/build.log" \
  go build -trimpath -buildvcs=false -ldflags "$ldflags" -o "$work/out/bin/" "${packages[@]}"

finish_build
