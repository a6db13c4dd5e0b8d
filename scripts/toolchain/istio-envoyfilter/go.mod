// The Go helper that runs Istio's own EnvoyFilter validation and patch code (scripts/toolchain/
// build-istio-envoyfilter.sh builds it; the module proxy serves istio.io/istio only as a pseudo-version of
// master, the one `go mod download istio.io/istio@latest` resolves, pinned in versions.env).
module example.invalid/istio-envoyfilter

go 1.26.0

require istio.io/istio v0.0.0-20260827124520-eed52ebb66ad
