# Sourced first by every build-*.sh, after its `set -euo pipefail`: $here (this folder), the pinned versions
# (versions.env) and the build frame with its heartbeat (progress.sh: begin_build, with_progress, finish_build).
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/versions.env"
. "$here/progress.sh"
