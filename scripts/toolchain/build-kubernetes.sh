#!/usr/bin/env bash
# Builds pulumi-resource-kubernetes at $KUBERNETES_VERSION into $1/bin. The provider module has no semver
# tags (required by pseudo-version) and embeds generated files that are not in the module zip, so: copy the
# module out of the read-only cache, run upstream's generator, and build in the copy so upstream's go.sum
# pins hold (the Makefile's `go generate` + `go build` with the version ldflag).
set -euo pipefail
. "$(dirname "$0")/prelude.sh"
begin_build "$1"

cd "$work" && go mod init example.invalid/scratch >/dev/null 2>&1
src=$(go mod download -json "$KUBERNETES_PROVIDER_MODULE@$KUBERNETES_PROVIDER_PSEUDO" \
      | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d.get("Dir") or sys.exit(d.get("Error")))')
cp -r "$src" "$work/provider" && chmod -R u+w "$work/provider"
cd "$work/provider"
# Upstream replaces the SDK with ../sdk (not in the zip); its released tag is the same code.
go mod edit -dropreplace=github.com/pulumi/pulumi-kubernetes/sdk/v4 \
            -require=github.com/pulumi/pulumi-kubernetes/sdk/v4@v$KUBERNETES_VERSION
(cd cmd/pulumi-resource-kubernetes && export VERSION=$KUBERNETES_VERSION \
  && with_progress "generate the provider's embedded files" "$work/generate.log" go run ./generate.go)
ldflags="-s -w -X github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version.Version=$KUBERNETES_VERSION"
with_progress "build pulumi-resource-kubernetes v$KUBERNETES_VERSION" "$work/build.log" \
  go build -trimpath -buildvcs=false -ldflags "$ldflags" \
    -o "$work/out/bin/pulumi-resource-kubernetes" ./cmd/pulumi-resource-kubernetes

finish_build
