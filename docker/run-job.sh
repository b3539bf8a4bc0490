#!/usr/bin/env bash
# Run one pldemu job across NODES containers on a private network, RANKS MPI ranks in each.
#
#   docker/run-job.sh [-r RANKS] NODES -- pldemu SUBCOMMAND [ARGS...]
#   docker/run-job.sh 2 -- pldemu check allreduce -n 2
#   docker/run-job.sh -r 2 3 -- pldemu check all -n 6 --size 17
#   docker/run-job.sh 2 -- python -c 'from mpi4py import MPI; print(MPI.Get_processor_name())'
#
# Each container ("node") runs sshd with a key made for this job; mpiexec runs in node 0 and starts its
# proxies on every node with hydra's ssh launcher, so MPI traffic between nodes crosses the network
# (UCX_TLS=tcp,self: no shared memory between containers, which have their own IPC namespaces anyway).
# `pldemu ...` is run as `python -m mpi4py -m pldemu ...`, directly under that mpiexec; any other command
# runs as given on every rank. Before the job it prints where each rank runs; after it, the bytes each
# node's network interface moved. The containers, the network and the key are removed on exit, however
# the job ends. Exit code: the job's; 2 for bad usage.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

usage() {
    die "usage: $(basename "$0") [-r RANKS_PER_NODE] NODES -- pldemu SUBCOMMAND [ARGS...]   (NODES >= 1)"
}

RANKS=1
JOB=pldemu-job-$$
NET=$JOB-net
TMP=""
NODES=()

cleanup() {
    local code=$?
    trap - EXIT INT TERM HUP
    local now=()  # podman's rm -f would wait 10 s for a polite stop; docker's kills at once
    if [ "$ENGINE" = podman ]; then now=(-t 0); fi
    if [ ${#NODES[@]} -gt 0 ]; then "$ENGINE" rm -f "${now[@]}" "${NODES[@]}" >/dev/null 2>&1 || true; fi
    "$ENGINE" network rm "$NET" >/dev/null 2>&1 || true
    if [ ${#NODES[@]} -gt 0 ] && "$ENGINE" container inspect "${NODES[0]}" >/dev/null 2>&1; then
        echo "$(basename "$0"): warning: container ${NODES[0]} survived cleanup" >&2
    fi
    if [ -n "$TMP" ]; then rm -rf "$TMP"; fi
    exit "$code"
}

parse_args() {
    while getopts ":r:" opt; do
        case $opt in
            r) RANKS=$OPTARG ;;
            *) usage ;;
        esac
    done
    shift $((OPTIND - 1))
    [ $# -ge 3 ] && [ "$2" = -- ] || usage
    [[ $1 =~ ^[1-9][0-9]*$ ]] && [[ $RANKS =~ ^[1-9][0-9]*$ ]] || usage
    NNODES=$1
    shift 2
    CMD=("$@")
    if [ "${CMD[0]}" = pldemu ]; then CMD=(python -m mpi4py -m pldemu "${CMD[@]:1}"); fi
}

# The engine's own chatter (podman's cleanup processes inherit its stderr) goes to a log, shown on failure.
quietly() {
    "$@" >>"$TMP/engine.log" 2>&1 || { tail -5 "$TMP/engine.log" >&2; die "failed: $*"; }
}

# A key pair for this job only, made inside the image (the host needs no ssh), mounted read-only.
make_keys() {
    TMP=$(mktemp -d)
    mkdir "$TMP/ssh"
    quietly "$ENGINE" run --rm -v "$TMP/ssh:/k" "$PLDEMU_IMAGE" \
        sh -c 'ssh-keygen -q -t ed25519 -N "" -C pldemu-job -f /k/id_ed25519 && cp /k/id_ed25519.pub /k/authorized_keys'
}

start_nodes() {
    local i name
    quietly "$ENGINE" network create "$NET"
    for ((i = 0; i < NNODES; i++)); do
        name=$JOB-node$i
        NODES+=("$name")
        quietly "$ENGINE" run -d --name "$name" --hostname "$name" --network "$NET" --shm-size 256m \
            -v "$TMP/ssh:/run/pldemu-ssh:ro" "$PLDEMU_IMAGE" pldemu-node
    done
    # Every node's sshd answers node 0 before the job starts (10 s at most).
    for name in "${NODES[@]}"; do
        for ((i = 0; ; i++)); do
            if "$ENGINE" exec "${NODES[0]}" ssh "$name" true 2>/dev/null; then break; fi
            [ $i -lt 50 ] || die "node $name: sshd did not answer within 10 s"
            sleep 0.2
        done
    done
}

# mpiexec in node 0 over every node; the arguments are the command each rank runs.
mpi_run() {
    local hosts
    hosts=$(printf "%s:$RANKS," "${NODES[@]}")
    "$ENGINE" exec -w /work "${NODES[0]}" mpiexec -launcher ssh -hosts "${hosts%,}" -n $((NNODES * RANKS)) \
        -genv UCX_TLS tcp,self "$@"
}

WHERE='from mpi4py import MPI
w = MPI.COMM_WORLD
node = w.Split_type(MPI.COMM_TYPE_SHARED)
rows = w.gather((w.Get_rank(), MPI.Get_processor_name(), node.Get_size()))
if w.Get_rank() == 0:
    for rank, host, local in rows:
        print(f"# rank {rank}: processor {host}, {local} rank(s) share its memory")'

# Bytes in and out of each node's network interface (the job's traffic between containers).
net_bytes() {
    local name
    for name in "${NODES[@]}"; do
        "$ENGINE" exec "$name" sh -c 'cat /sys/class/net/eth0/statistics/rx_bytes /sys/class/net/eth0/statistics/tx_bytes' \
            | paste -sd ' '
    done
}

report_net() {
    local before=$1 after=$2 i=0
    paste -d ' ' <(echo "$before") <(echo "$after") | while read -r rx0 tx0 rx1 tx1; do
        echo "# ${NODES[$i]} eth0 during the job: $((rx1 - rx0)) bytes in, $((tx1 - tx0)) bytes out"
        i=$((i + 1))
    done
}

main() {
    local t0 before after code=0
    parse_args "$@"
    pick_engine
    image_exists "$PLDEMU_IMAGE" || die "no image $PLDEMU_IMAGE: build it first with docker/build.sh"
    trap cleanup EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    trap 'exit 129' HUP
    t0=$(date +%s.%N)
    make_keys
    start_nodes
    echo "# $NNODES containers x $RANKS rank(s) on network $NET, ready in $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f s", b - a }')"
    mpi_run python -c "$WHERE"
    before=$(net_bytes)
    echo "# job: ${CMD[*]}"
    t0=$(date +%s.%N)
    # In the background so a signal to this script runs its trap at once, not when the job ends.
    mpi_run "${CMD[@]}" &
    wait $! || code=$?
    after=$(net_bytes)
    echo "# job exit code $code after $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f s", b - a }')"
    report_net "$before" "$after"
    return "$code"
}

main "$@"
