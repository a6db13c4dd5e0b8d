#!/usr/bin/env bash
# Builds actionlint VERSION into DEST/bin, for the test that lints .github/workflows/:
#   build-actionlint.sh DEST VERSION
# Its go.mod has no replace directives, so a plain `go install module@version` builds exactly the released
# module from the module proxy (the PyPI wrapper downloads a binary from GitHub, which is out of reach here).
# `actionlint -version` then names the module version that go install recorded.
set -euo pipefail
. "$(dirname "$0")/prelude.sh"
version=$2
begin_build "$1"
# `go install module@version` takes no -mod flag; it installs straight into out/bin.
export GOFLAGS= GOBIN=$work/out/bin
with_progress "build actionlint $version from Go modules" "$work/build.log" \
  go install -trimpath -ldflags "-s -w" "github.com/rhysd/actionlint/cmd/actionlint@$version"

finish_build
