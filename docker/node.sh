#!/bin/sh
# A node of a multi-container job: sshd in the foreground, so hydra can start MPI proxies here.
set -e
mkdir -p /run/sshd
ssh-keygen -A >/dev/null
exec /usr/sbin/sshd -D -e
