#!/usr/bin/env bash
# Node Problem Detector custom plugin: the CUDAContextProblem condition from the result ctxlab-check
# (ctxlab-daemonset.yaml) left on the node's host path.
#
# NPD's contract: exit 0 the condition is false (all holds), 1 it is true (a claim fails or errs, a
# scenario broke, the run judged fewer claims than its level promises, or the node cannot run CUDA),
# anything else unknown (no result yet, unreadable, or older than CTXLAB_MAX_AGE seconds, default
# 86400); standard output is the condition's message.
# CTXLAB_RESULT (default /var/lib/ctxlab/ctxlab.json) and CTXLAB_PYTHON (default python3) may be set.
exec "${CTXLAB_PYTHON:-python3}" -m ctxlab status "${CTXLAB_RESULT:-/var/lib/ctxlab/ctxlab.json}" \
    --max-age "${CTXLAB_MAX_AGE:-86400}" --limit 200
