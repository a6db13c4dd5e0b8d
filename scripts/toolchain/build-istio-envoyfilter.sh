#!/usr/bin/env bash
# Builds the project's Istio EnvoyFilter helper (scripts/toolchain/istio-envoyfilter/: Istio's own
# ValidateEnvoyFilter and envoyfilter patch code) against istio.io/istio $ISTIO_MODULE_VERSION into $1/bin,
# with $1/source.stamp, the hash of the helper's source that scripts/bootstrap compares to rebuild on a change:
#   build-istio-envoyfilter.sh DEST
# istio.io/istio has no replace directives, so the helper's go.mod needs only the require line; tidy then
# resolves exactly Istio's own dependency versions (MVS over its go.mod).
set -euo pipefail
. "$(dirname "$0")/prelude.sh"
begin_build "$1"

src=("$here/istio-envoyfilter/go.mod" "$here/istio-envoyfilter/main.go")
cp "${src[@]}" "$work/"
cat "${src[@]}" | sha256sum | cut -c1-16 > "$work/out/source.stamp"
cd "$work"
grep -q "istio.io/istio $ISTIO_MODULE_VERSION\$" go.mod \
  || { echo "build-istio-envoyfilter: istio-envoyfilter/go.mod does not require istio.io/istio $ISTIO_MODULE_VERSION" >&2; exit 1; }
with_progress "resolve istio.io/istio $ISTIO_MODULE_VERSION modules" "$work/tidy.log" go mod tidy
with_progress "build istio-envoyfilter (cold: ~10 min on 2 cores)" "$work/build.log" \
  go build -trimpath -buildvcs=false -ldflags "-s -w" -o "$work/out/bin/istio-envoyfilter" .

finish_build
