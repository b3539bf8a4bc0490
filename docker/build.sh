#!/usr/bin/env bash
# Build the pldemu image (docker/Dockerfile) with podman or docker.
#
#   docker/build.sh                 # image localhost/pldemu:latest
#   PLDEMU_ENGINE=docker docker/build.sh
#   PLDEMU_BASE=my.registry/debian:bookworm-slim docker/build.sh
#
# The base image is PLDEMU_BASE (default Debian bookworm-slim from Docker Hub) when it is present or can
# be pulled; otherwise a Debian bookworm minbase root file system is made with debootstrap (root only)
# from this machine's Debian mirror and imported as localhost/pldemu-base:bookworm (made once, reused).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

BASE=${PLDEMU_BASE:-docker.io/library/debian:bookworm-slim}
LOCAL_BASE=localhost/pldemu-base:bookworm
SUITE=${PLDEMU_SUITE:-bookworm}
REPO=$(cd "$PLDEMU_DOCKER_DIR/.." && pwd)
WORK=""

cleanup() {
    if [ -n "$WORK" ]; then rm -rf "$WORK"; fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f s", b - a }'; }

# The Debian mirror this machine's apt uses (PLDEMU_DEBIAN_MIRROR overrides; empty = debootstrap's default).
host_mirror() {
    if [ -n "${PLDEMU_DEBIAN_MIRROR:-}" ]; then echo "$PLDEMU_DEBIAN_MIRROR"; return; fi
    { grep -hs '^URIs:' /etc/apt/sources.list.d/*.sources | awk '{ print $2 }'
      grep -hs '^deb ' /etc/apt/sources.list | awk '{ print $2 }'; } | grep -v security | head -1 || true
}

debootstrap_base() {
    [ "$(id -u)" = 0 ] || die "no base image reachable and debootstrap needs root: run as root, or set PLDEMU_BASE to a Debian image you can pull"
    command -v debootstrap >/dev/null 2>&1 || die "no base image reachable: apt-get install debootstrap (or set PLDEMU_BASE)"
    local root="$WORK/rootfs" mirror t0
    mirror=$(host_mirror)
    t0=$(now)
    echo "== base: debootstrap --variant=minbase $SUITE (mirror: PLDEMU_DEBIAN_MIRROR, else the one apt uses here)"
    # shellcheck disable=SC2086  # an empty mirror means debootstrap's default
    debootstrap --variant=minbase "$SUITE" "$root" $mirror >"$WORK/debootstrap.log" 2>&1 \
        || { tail -20 "$WORK/debootstrap.log" >&2; die "debootstrap failed (log above)"; }
    rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
    tar -C "$root" -c . | "$ENGINE" import - "$LOCAL_BASE" >"$WORK/import.log" 2>&1 \
        || { tail -5 "$WORK/import.log" >&2; die "$ENGINE import failed (log above)"; }
    echo "== base: imported $LOCAL_BASE in $(since "$t0")"
}

pick_base() {
    if image_exists "$BASE"; then return; fi
    if timeout 120 "$ENGINE" pull -q "$BASE" >/dev/null 2>"$WORK/pull.log"; then return; fi
    echo "== base: cannot pull $BASE ('$ENGINE pull $BASE' says why)"
    BASE=$LOCAL_BASE
    if image_exists "$BASE"; then echo "== base: reusing $BASE"; return; fi
    debootstrap_base
}

# Only what the image needs, so a local .venv or caches never enter the build context (every COPY in
# the Dockerfile reads from these; tests/docker checks it).
CONTEXT=(pyproject.toml README.md pldemu docker)
make_context() {
    mkdir -p "$WORK/context"
    tar -C "$REPO" --exclude=__pycache__ --exclude='*.pyc' -c "${CONTEXT[@]}" | tar -C "$WORK/context" -x
}

# How this machine reaches PyPI: proxy variables go in as build arguments, the CA bundle pip trusts as a
# build secret (PLDEMU_PIP_CERT, else PIP_CERT, else the system bundle).
build_args() {
    local var cert
    ARGS=(--build-arg "BASE=$BASE")
    for var in HTTP_PROXY HTTPS_PROXY NO_PROXY http_proxy https_proxy no_proxy PIP_INDEX_URL; do
        if [ -n "${!var:-}" ]; then ARGS+=(--build-arg "$var=${!var}"); fi
    done
    cert=${PLDEMU_PIP_CERT:-${PIP_CERT:-/etc/ssl/certs/ca-certificates.crt}}
    if [ -s "$cert" ]; then ARGS+=(--secret "id=pipcert,src=$cert"); fi
}

main() {
    local t0 t1
    pick_engine
    WORK=$(mktemp -d)
    t0=$(now)
    pick_base
    make_context
    build_args
    echo "== image: $ENGINE build $PLDEMU_IMAGE from $BASE"
    t1=$(now)
    if [ "$ENGINE" = docker ]; then export DOCKER_BUILDKIT=1; fi
    # The engine's output goes to a log (PLDEMU_VERBOSE=1: to the terminal); its tail is shown on failure.
    if [ -n "${PLDEMU_VERBOSE:-}" ]; then
        "$ENGINE" build -f "$WORK/context/docker/Dockerfile" -t "$PLDEMU_IMAGE" "${ARGS[@]}" "$WORK/context"
    elif ! "$ENGINE" build -f "$WORK/context/docker/Dockerfile" -t "$PLDEMU_IMAGE" "${ARGS[@]}" \
            "$WORK/context" >"$WORK/build.log" 2>&1; then
        tail -30 "$WORK/build.log" >&2
        die "$ENGINE build failed (last lines above; PLDEMU_VERBOSE=1 shows everything)"
    fi
    echo "== image: $PLDEMU_IMAGE built in $(since "$t1") (all steps $(since "$t0")): $("$ENGINE" run --rm "$PLDEMU_IMAGE" sh -c 'mpichversion | head -1; python -c "import mpi4py, pldemu; print(\"mpi4py\", mpi4py.__version__)"' | tr -s ' ' | paste -sd ';')"
}

main "$@"
