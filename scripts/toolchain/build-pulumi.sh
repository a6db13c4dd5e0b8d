#!/usr/bin/env bash
# Builds the pulumi CLI at $PULUMI_VERSION from Go modules into $1/bin, the way the official release does
# (.goreleaser.yml: -trimpath, osusergo+grpcnotrace tags, CGO off, the version ldflag that `pulumi version`
# and the Automation API's version check read). `go install pkg@version` refuses pkg/v3's replace
# directives, so a throwaway wrapper module requires it instead.
set -euo pipefail
. "$(dirname "$0")/prelude.sh"
begin_build "$1"

cd "$work"
wrapper_module pulumi 1.26 github.com/pulumi/pulumi/pkg/v3/cmd/pulumi <<MOD
require (
	github.com/pulumi/pulumi/pkg/v3 $PULUMI_VERSION
	github.com/pulumi/pulumi/sdk/v3 $PULUMI_VERSION
)

// Copied from pkg/go.mod at the tag: the only replace there that is not a relative path.
replace github.com/atotto/clipboard => ${CLIPBOARD_REPLACE/@/ }
MOD
with_progress "resolve pulumi $PULUMI_VERSION modules" "$work/tidy.log" go mod tidy
ldflags="-s -w -X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=$PULUMI_VERSION"
with_progress "build pulumi $PULUMI_VERSION" "$work/build.log" \
  go build -trimpath -buildvcs=false -tags osusergo,grpcnotrace -ldflags "$ldflags" \
    -o "$work/out/bin/pulumi" github.com/pulumi/pulumi/pkg/v3/cmd/pulumi

# The exec shim the language host runs programs with is upstream's own file, shipped in the sdk/v3 module.
sdk=$(go list -m -f '{{.Dir}}' github.com/pulumi/pulumi/sdk/v3)
install -m 0755 "$sdk/python/cmd/pulumi-language-python-exec" "$work/out/bin/"

finish_build
