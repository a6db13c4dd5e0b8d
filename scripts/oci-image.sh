# Sourced, not run: what scripts/build-reconciler-image and scripts/build-instance-image share. An image built from
# registry packages only (no base image pulled), as an OCI layout in the cache, in layers tagged by the hash of what
# makes each, so an unchanged layer is never made again.
#   image_start NAME REPOSITORY "$@"   parses [--oci DIR] [--archive FILE] [TAG]; sets oci, archive, tag_arg, cache
#                            (NAME's cache directory), layout (its OCI layout), work (a scratch directory, removed
#                            on exit) and started
#   image_require TOOL...    each on PATH, else one line naming the package and exit 2
#   key                      a short hash of stdin: a layer's tag
#   have TAG                 whether the layout holds TAG
#   add_layer FROM TAG DIR WHAT   DIR's contents as a layer on FROM (or on nothing), tagged TAG
#   debian_extract DIR PKG,...    the packages and their dependencies extracted into DIR (mmdebstrap, no dpkg run)
#   image_finish TAG LAST KEEP... the layer LAST tagged TAG as the image; every tag but LAST's, KEEP's and TAG
#                                 removed and their blobs collected; copied to --oci DIR, and to --archive FILE as
#                                 a docker archive of REPOSITORY:TAG; prints `LAYOUT:TAG` on stdout
# Needs root (chroot, files of any owner), Debian's mmdebstrap and umoci, and skopeo for --oci.

log() { echo "$*" >&2; }
key() { sha256sum | cut -c1-16; }

image_start() {
  image_name=$1 repository=$2
  shift 2
  oci="" archive=""
  while [[ "${1:-}" == --oci || "${1:-}" == --archive ]]; do
    [[ $# -ge 2 ]] || { log "build-$image_name: $1 needs a value"; exit 2; }
    if [[ $1 == --oci ]]; then oci=$2; else archive=$2; fi
    shift 2
  done
  tag_arg=${1:-}
  image_require mmdebstrap umoci ${oci:+skopeo} ${archive:+skopeo}
  sources=${APT_SOURCES:-/etc/apt/sources.list.d/debian.sources}
  cache=${SSH_GATEWAY_CACHE:-$HOME/.cache/ssh-gateway}/$image_name
  layout=$cache/oci
  started=$SECONDS
  mkdir -p "$cache"
  [[ -f "$layout/index.json" ]] || umoci init --layout "$layout"
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
}

image_require() {
  local tool
  for tool in "$@"; do
    command -v "$tool" >/dev/null \
      || { log "build-$image_name: no $tool: apt-get install $tool (scripts/system-packages)"; exit 2; }
  done
}

# DIR's contents as a layer on FROM_TAG (or on nothing), owners root unless DIR says otherwise, every mtime the
# same: the same input makes the same layer digest.
add_layer() {
  local from=$1 tag=$2 dir=$3
  if [[ -z "$from" ]]; then
    umoci new --image "$layout:$tag"
    from=$tag
  fi
  tar -C "$dir" --sort=name --mtime=@0 --numeric-owner --pax-option=delete=atime,delete=ctime \
    -cf "$work/layer.tar" $(ls -A "$dir")
  umoci raw add-layer --image "$layout:$from" --tag "$tag" --history.created_by "build-$image_name: $4" \
    "$work/layer.tar"
  rm -f "$work/layer.tar"
}

have() { umoci ls --layout "$layout" | grep -qx "$1"; }

# Extracted, not installed: no maintainer script runs, so the root needs no dpkg, apt or perl, and what a script
# would have made (users, directories) is the caller's to make.
debian_extract() {
  local dir=$1 packages=$2
  mmdebstrap --variant=extract --include="$packages" bookworm "$dir" "$sources" >"$work/mmdebstrap.log" 2>&1 \
    || { tail -20 "$work/mmdebstrap.log" >&2; exit 1; }
}

image_finish() {
  local tag=$1 old megabytes done
  shift
  umoci tag --image "$layout:$1" "$tag"
  for old in $(umoci ls --layout "$layout"); do
    [[ " $* $tag " == *" $old "* ]] || umoci rm --image "$layout:$old"
  done
  umoci gc --layout "$layout"
  if [[ -n "$oci" ]]; then
    skopeo copy --quiet "oci:$layout:$tag" "oci:$oci:$tag"
  fi
  # A docker archive, not an OCI one: containerd's import names a docker archive's image by its normalized reference
  # (docker.io/library/ before a bare name), the name the kubelet asks for a pod's `image: REPOSITORY:TAG`; an OCI
  # archive's name is kept as written, so a bare one would be imported and never found.
  if [[ -n "$archive" ]]; then
    rm -f "$archive"
    skopeo copy --quiet "oci:$layout:$tag" "docker-archive:$archive:$repository:$tag"
  fi
  megabytes=$(python3 - "$layout" "$tag" <<'EOF'
import json, sys
layout, tag = sys.argv[1:]
index = json.load(open(f"{layout}/index.json"))
name = "org.opencontainers.image.ref.name"
(digest,) = [m["digest"] for m in index["manifests"] if m.get("annotations", {}).get(name) == tag]
manifest = json.load(open(f"{layout}/blobs/sha256/{digest.split(':')[1]}"))
print(f"{sum(layer['size'] for layer in manifest['layers']) / 1e6:.1f}")
EOF
  )
  done="==> $layout:$tag in $((SECONDS - started)) s (layers: $megabytes MB compressed)"
  log "$done${oci:+; copied to oci:$oci:$tag}${archive:+; docker archive $archive of $repository:$tag}"
  echo "$layout:$tag"
}
