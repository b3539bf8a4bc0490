#!/usr/bin/env bash
# Run CI exactly as it runs on a submission: a fresh clone of the committed HEAD, CI=true, .ci/run.
# A green run in the work tree can hide a missing install step; this cannot.
set -euo pipefail
top=$(git rev-parse --show-toplevel)
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
git clone -q "$top" "$d/pldemu"
cd "$d/pldemu"
start=$(date +%s)
CI=true bash .ci/run
echo "ci-fresh-clone: passed in $(( $(date +%s) - start )) s"
