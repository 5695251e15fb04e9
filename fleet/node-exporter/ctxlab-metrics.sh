#!/usr/bin/env bash
# Run `ctxlab check` and leave its metrics where node_exporter's textfile collector reads them.
#
#   ctxlab-metrics.sh [TEXTFILE_DIR] [STATE_DIR]
#
# TEXTFILE_DIR (default /var/lib/prometheus/node-exporter, Debian's --collector.textfile.directory) gets
# ctxlab.prom; STATE_DIR (default /var/lib/ctxlab) gets ctxlab.json, the full result, which the Slurm
# health check and the Node Problem Detector plugin read. ctxlab writes each file atomically (a temporary
# file beside it, then a rename; the temporary name does not end in .prom, so the collector never reads
# half a file). A node that cannot run writes ctxlab_up 0 and its reason. Exit status: check's (0, 1, 2).
# CTXLAB (default: ctxlab) is the command; CTXLAB_ARGS adds options (e.g. "-d all"). CTXLAB_LEVEL (default
# 1: node health, 3.8 s on an H200, docs/fleet.md) is check's level: a timer on every node pays it every
# time, and what a node must keep to take jobs is level 1's; set 3 for the full catalogue (about a minute).
set -u
textfiles=${1:-/var/lib/prometheus/node-exporter}
state=${2:-/var/lib/ctxlab}
mkdir -p "$textfiles" "$state"
# shellcheck disable=SC2086  # CTXLAB_ARGS is a list of options
"${CTXLAB:-ctxlab}" check --level "${CTXLAB_LEVEL:-1}" ${CTXLAB_ARGS:-} --openmetrics "$textfiles/ctxlab.prom" --json "$state/ctxlab.json" \
    --output "$state/ctxlab.txt"
