#!/usr/bin/env bash
# Slurm HealthCheckProgram (slurm.conf(5)): drain this node when ctxlab says its CUDA contexts break a
# documented claim, or when the node cannot run CUDA at all; resume it when ctxlab drained it and all holds.
#
#   slurm.conf:  HealthCheckProgram=/usr/local/sbin/ctxlab-healthcheck.sh
#                HealthCheckInterval=3600
#
# slurmd kills a HealthCheckProgram after 60 seconds, and a full `ctxlab check` (level 3) takes about a minute
# on an H200, so this reads the result the timer (fleet/node-exporter) wrote, CTXLAB_RESULT (default
# /var/lib/ctxlab/ctxlab.json), when it is younger than CTXLAB_MAX_AGE seconds (default 86400). Otherwise
# it runs `ctxlab check --level 1` itself (CTXLAB_LEVEL; 3.8 s on an H200, docs/fleet.md): the promises a
# context handoff rests on, which is what a node must keep to take jobs; the rest are a fleet report's, not
# a drain's. It runs within CTXLAB_TIME_LIMIT seconds (default 50), on the labs in CTXLAB_ONLY when set,
# writing the result and, with CTXLAB_TEXTFILES, the metrics file.
# A check that runs out of time drains nothing (unknown is not a problem); a failing claim or a node
# that cannot run is drained with the reason "ctxlab: ...". Only nodes whose reason starts with ctxlab:
# are resumed. CTXLAB, CTXLAB_PYTHON, SCONTROL and NODENAME replace the commands and the node's name.
set -u
result=${CTXLAB_RESULT:-/var/lib/ctxlab/ctxlab.json}
python=${CTXLAB_PYTHON:-python3}
scontrol=${SCONTROL:-scontrol}
node=${NODENAME:-$(hostname -s)}
log() { logger -t ctxlab-healthcheck -- "$*" 2>/dev/null; echo "ctxlab-healthcheck: $*" >&2; }

line=$("$python" -m ctxlab status "$result" --max-age "${CTXLAB_MAX_AGE:-86400}" --limit 200)
status=$?
if [ "$status" -eq 2 ]; then  # no recent result: run the short check now, within the time limit
    mkdir -p "$(dirname "$result")"
    metrics=()
    if [ -n "${CTXLAB_TEXTFILES:-}" ]; then metrics=(--openmetrics "$CTXLAB_TEXTFILES/ctxlab.prom"); fi
    only=()
    if [ -n "${CTXLAB_ONLY:-}" ]; then only=(--only "$CTXLAB_ONLY"); fi
    timeout "${CTXLAB_TIME_LIMIT:-50}" "${CTXLAB:-ctxlab}" check --level "${CTXLAB_LEVEL:-1}" "${only[@]}" \
        --json "$result" "${metrics[@]}" --output /dev/null
    ran=$?
    if [ "$ran" -eq 124 ] || [ "$ran" -eq 137 ]; then
        log "check ran out of ${CTXLAB_TIME_LIMIT:-50} s: node $node left as it is"
        exit 0
    fi
    line=$("$python" -m ctxlab status "$result" --limit 200)
    status=$?
fi
case "$status" in
    1)
        log "draining $node: $line"
        "$scontrol" update NodeName="$node" State=DRAIN Reason="$line"
        ;;
    0)
        current=$("$scontrol" show node "$node" 2>/dev/null | tr ' ' '\n' | sed -n 's/^Reason=//p')
        if [ "${current#ctxlab:}" != "$current" ]; then
            log "resuming $node: $line"
            "$scontrol" update NodeName="$node" State=RESUME
        fi
        ;;
    *)
        log "unknown for $node: $line"
        ;;
esac
exit 0
