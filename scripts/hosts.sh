#!/usr/bin/env bash
# Simulated hosts on one machine: run an MPI job across H network namespaces ("hosts") of R ranks each.
#
#   scripts/hosts.sh [--mpiexec PATH] [--report FILE] HxR -- PROGRAM [ARGS...]
#
# Each host is a network namespace on a private bridge, and each host's processes get their own UTS
# (hostname pldemu-hI), IPC and mount namespace with a private /dev/shm, so nothing but the network
# joins two hosts. mpiexec (MPICH hydra) runs here and starts one proxy per host through its ssh
# launcher, whose "ssh" is a wrapper that enters the host's namespaces. UCX is held to TCP
# (UCX_TLS=tcp,self on the namespace's eth0): without that it would use shared memory across the
# namespaces and nothing would cross the network. MPICH takes its nodes from hydra's host list, so
# ranks of one host still share memory with each other (MPI.COMM_TYPE_SHARED = one group per host).
#
# --report FILE: at exit, before the teardown, one line per host is written:
#   host I ns NAME ip ADDR tx_bytes N rx_bytes N      (the host's veth, seen from the bridge side)
#
# Exit code: the job's (mpiexec's). 2 when the arguments are bad, when not root, or when `ip netns`
# or `unshare` is missing. On exit -- normal, failed, or SIGTERM/SIGINT/SIGHUP -- every process in
# the namespaces is killed and the namespaces, the bridge and the temporary directory removed.
# Namespaces left by a run that was SIGKILLed (its pid is gone) are removed by the next run.
set -uo pipefail

prog=${0##*/}
die() { echo "$prog: error: $*" >&2; exit 2; }

mpiexec_bin=mpiexec
report=${PLDEMU_HOSTS_REPORT:-}
while [ $# -gt 0 ]; do
    case $1 in
        --mpiexec) mpiexec_bin=${2:?}; shift 2 ;;
        --report) report=${2:?}; shift 2 ;;
        -h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) break ;;
    esac
done
[ $# -ge 3 ] && [ "$2" = "--" ] || die "usage: $prog [--mpiexec PATH] [--report FILE] HxR -- PROGRAM [ARGS...]"
shape=$1; shift 2
[[ $shape =~ ^([1-9][0-9]?)x([1-9][0-9]?)$ ]] || die "host shape must be HxR (e.g. 2x2), got '$shape'"
nhosts=${BASH_REMATCH[1]}; ppn=${BASH_REMATCH[2]}
[ "$nhosts" -le 32 ] || die "at most 32 hosts, got $nhosts"

[ "$(id -u)" = 0 ] || die "simulated hosts need root (network namespaces and a bridge); run as root or use --hosts/--hostfile on real machines"
command -v ip >/dev/null 2>&1 && ip netns list >/dev/null 2>&1 || die "'ip netns' is not available (install iproute2; the kernel needs network namespaces)"
command -v unshare >/dev/null 2>&1 || die "'unshare' is not available (util-linux)"
command -v "$mpiexec_bin" >/dev/null 2>&1 || die "mpiexec not found: $mpiexec_bin"

tag=pld$$                      # every name of this run carries our pid: concurrent runs never collide
bridge=${tag}br
workdir=
job=

veth_bytes() { cat "/sys/class/net/$1/statistics/$2_bytes" 2>/dev/null || echo 0; }

write_report() {
    [ -n "$report" ] && [ -n "${subnet:-}" ] || return 0
    local i
    : >"$report"
    for i in $(seq 1 "$nhosts"); do
        # The bridge side's tx is what the host received and vice versa: report the host's view.
        echo "host $i ns ${tag}h$i ip $subnet.$i tx_bytes $(veth_bytes "${tag}v$i" rx) rx_bytes $(veth_bytes "${tag}v$i" tx)" >>"$report"
    done
}

kill_namespace() {  # every process in namespace $1, then the namespace (its veth goes with it)
    local pids
    pids=$(ip netns pids "$1" 2>/dev/null)
    [ -n "$pids" ] && kill -KILL $pids 2>/dev/null
    ip netns delete "$1" 2>/dev/null
}

cleanup() {
    local rc=$? i
    trap - EXIT INT TERM HUP
    if [ -n "$job" ]; then
        kill -TERM "$job" 2>/dev/null
        for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$job" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$job" 2>/dev/null
    fi
    write_report
    for i in $(seq 1 "$nhosts"); do kill_namespace "${tag}h$i"; done
    ip link delete "$bridge" 2>/dev/null
    [ -n "$workdir" ] && rm -rf "$workdir"
    exit "$rc"
}
on_signal() { trap - INT TERM HUP; exit $((128 + $1)); }
trap cleanup EXIT
trap 'on_signal 2' INT
trap 'on_signal 15' TERM
trap 'on_signal 1' HUP

sweep_stale() {  # namespaces and bridges of runs that died without their trap (SIGKILL)
    local name pid
    for name in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E '^pld[0-9]+h[0-9]+$'); do
        pid=${name#pld}; pid=${pid%%h*}
        kill -0 "$pid" 2>/dev/null || kill_namespace "$name"
    done
    for name in $(ip -o link show type bridge 2>/dev/null | awk -F': ' '{print $2}' | grep -E '^pld[0-9]+br$'); do
        pid=${name#pld}; pid=${pid%br}
        kill -0 "$pid" 2>/dev/null || ip link delete "$name" 2>/dev/null
    done
}

pick_subnet() {  # a 10.A.B.0/24 no interface of this machine uses, starting from one our pid picks
    local used k a b
    used=$(ip -4 -o addr show | awk '{print $4}')
    for k in $(seq 0 4999); do
        a=$(( 100 + ( ($$ + k) / 250 ) % 150 )); b=$(( ($$ + k) % 250 + 1 ))
        echo "$used" | grep -q "^10\.$a\.$b\." || { echo "10.$a.$b"; return 0; }
    done
    return 1
}

setup() {
    local i ns
    ip link add "$bridge" type bridge || return 1
    ip addr add "$subnet.254/24" dev "$bridge" || return 1
    ip link set "$bridge" up || return 1
    for i in $(seq 1 "$nhosts"); do
        ns=${tag}h$i
        ip netns add "$ns" || return 1
        ip link add "${tag}v$i" type veth peer name eth0 netns "$ns" || return 1
        ip link set "${tag}v$i" master "$bridge" up || return 1
        ip -n "$ns" addr add "$subnet.$i/24" dev eth0 || return 1
        ip -n "$ns" link set eth0 up || return 1
        ip -n "$ns" link set lo up || return 1
    done
}

write_wrapper() {  # hydra calls: WRAPPER [options] HOST "<proxy command>"
    local i
    {
        echo '#!/bin/sh'
        echo 'while [ $# -gt 0 ]; do case $1 in -*) shift ;; *) break ;; esac; done'
        echo 'host=$1; shift'
        echo 'case $host in'
        for i in $(seq 1 "$nhosts"); do echo "  $subnet.$i) ns=${tag}h$i; name=pldemu-h$i ;;"; done
        echo '  *) echo "hosts.sh wrapper: unknown host $host" >&2; exit 255 ;;'
        echo 'esac'
        # A host of its own: hostname, SysV IPC, and a private /dev/shm (gone with the last process).
        echo 'exec ip netns exec "$ns" unshare --uts --ipc --mount sh -c '"'"'hostname "$0" && mount -t tmpfs -o mode=1777 tmpfs /dev/shm && eval "$1"'"'"' "$name" "$*"'
    } >"$workdir/ssh"
    chmod +x "$workdir/ssh"
}

exec 9>/run/pldemu-hosts.lock || die "cannot open /run/pldemu-hosts.lock"
flock 9
sweep_stale
subnet=$(pick_subnet) || { flock -u 9; die "no free 10.x.y.0/24 subnet"; }
workdir=$(mktemp -d /tmp/pldemu-hosts.XXXXXX)
if ! setup; then flock -u 9; echo "$prog: error: could not set up the namespaces" >&2; exit 3; fi
flock -u 9
exec 9>&-
write_wrapper

hostlist=$(seq -s, -f "$subnet.%g" 1 "$nhosts")
"$mpiexec_bin" -launcher ssh -launcher-exec "$workdir/ssh" -localhost "$subnet.254" \
    -hosts "$hostlist" -ppn "$ppn" -n $((nhosts * ppn)) \
    -genv UCX_TLS tcp,self -genv UCX_NET_DEVICES eth0 -genv PLDEMU_SIM_HOSTS "$shape" \
    "$@" &
job=$!
wait "$job"
rc=$?
job=
exit "$rc"
