#!/usr/bin/env bash
# Builds kube-apiserver $KUBE_APISERVER_VERSION from k8s.io/kubernetes into $1/bin, for the tests' control
# plane (ssh_gateway/local/control_plane.py). k8s.io/kubernetes requires every staging module (k8s.io/api,
# client-go, ...) at v0.0.0 and replaces it with ./staging/src/..., which is not in the module zip: a
# wrapper module replaces each one with its tagged release v0.<minor>.<patch>, the list generated from the
# downloaded go.mod itself so a new staging module cannot be missed (kubernetes/kubernetes#80316).
# The version ldflags are those of upstream's hack/lib/version.sh; without them the server reports
# v0.0.0-master and pulumi-kubernetes refuses it ("minimum supported cluster version is v1.13. found v0.0").
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/versions.env"
. "$here/progress.sh"
begin_build "$1"

version=v$KUBE_APISERVER_VERSION
staging=v0.${KUBE_APISERVER_VERSION#1.}
cd "$work"
wrapper_module kube-apiserver 1.26 k8s.io/kubernetes/cmd/kube-apiserver <<MOD
require k8s.io/kubernetes $version
MOD
upstream_mod=$(go mod download -json "k8s.io/kubernetes@$version" \
  | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d.get("GoMod") or sys.exit(d.get("Error")))')
modules=$(grep -oE '^\s*k8s\.io/[a-z0-9-]+ => \./staging/' "$upstream_mod" | awk '{print $1}')
[ -n "$modules" ] || { echo "build-kube-apiserver: no staging replaces found in $upstream_mod" >&2; exit 1; }
for m in $modules; do go mod edit "-replace=$m=$m@$staging"; done
echo "==> kube-apiserver $version: $(echo "$modules" | wc -l) staging modules pinned at $staging"
with_progress "resolve kube-apiserver $version modules" "$work/tidy.log" go mod tidy

released=$(go list -m -f '{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}' "k8s.io/kubernetes")
minor=$(echo "$KUBE_APISERVER_VERSION" | cut -d. -f2)
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$released"
done
with_progress "build kube-apiserver $version" "$work/build.log" \
  go build -trimpath -buildvcs=false -ldflags "$ldflags" \
    -o "$work/out/bin/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver

finish_build
