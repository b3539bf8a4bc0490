# Shared by docker/build.sh and docker/run-job.sh (sourced, not run): which container engine, and how
# it is configured. Override with PLDEMU_ENGINE=podman|docker and PLDEMU_IMAGE=NAME:TAG.

PLDEMU_DOCKER_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PLDEMU_IMAGE=${PLDEMU_IMAGE:-localhost/pldemu:latest}

die() {
    echo "$(basename "$0"): $*" >&2
    exit 2
}

# The engine: PLDEMU_ENGINE if set, else podman, else docker.
pick_engine() {
    ENGINE=${PLDEMU_ENGINE:-}
    if [ -z "$ENGINE" ]; then
        if command -v podman >/dev/null 2>&1; then ENGINE=podman
        elif command -v docker >/dev/null 2>&1; then ENGINE=docker
        else die "neither podman nor docker found (Debian: apt-get install podman runc)"
        fi
    fi
    command -v "$ENGINE" >/dev/null 2>&1 || die "PLDEMU_ENGINE=$ENGINE: no such command"
    if [ "$ENGINE" = podman ] && [ -z "${CONTAINERS_CONF:-}" ]; then
        export CONTAINERS_CONF="$PLDEMU_DOCKER_DIR/containers.conf"
        command -v runc >/dev/null 2>&1 || die "podman is set to use runc (docker/containers.conf): apt-get install runc, or set CONTAINERS_CONF to your own file"
    fi
}

image_exists() {
    "$ENGINE" image inspect "$1" >/dev/null 2>&1
}
