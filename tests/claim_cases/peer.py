"""Cases for the peer lab's claims (see tests/claim_cases/__init__.py), starting from the run recorded on two
H200s (labs/results/peer.json)."""

from tests.claim_cases import Case, edit, on_thread, recorded_now, without

SILENT = "silent-wrong-result (got -1, expected 15260499509249)"
# peer.json was recorded before T2 recorded its current context and A's handle (the claim compares them since;
# it reads the recording's own current_is_a there): A's handle in each handoff, and P's in the primary one.
A = {"created": 139766638280272, "primary": 760247120}
P_PRIMARY = 760324272


def used_now(kind: str, **fields):
    """T2's observation of the ``kind`` handoff as recorded now: its current context (A's, unless changed), A."""
    return recorded_now("peer after handoff", f"peer-handoff-{kind}", ("current_is_a",),
                        **{"current": A[kind], "a": A[kind], **fields})

CASES: dict[str, Case] = {
    "peer.enable-once": Case("peer.json", breaks=[
        edit("peer enabled", "peer-handoff-created", first="CUDA_ERROR_PEER_ACCESS_UNSUPPORTED"),
        edit("peer enabled", "peer-handoff-primary", second="CUDA_SUCCESS"),
    ]),
    "peer.access-follows-context": Case("peer.json", breaks=[
        edit("peer after handoff", "peer-handoff-created", kernel="CUDA_ERROR_ILLEGAL_ADDRESS"),
        edit("peer after handoff", "peer-handoff-primary", kernel=SILENT),
        edit("peer after handoff", "peer-handoff-created", enable_again="CUDA_SUCCESS"),
        edit("peer after handoff", "peer-handoff-primary", current_is_a=False),
        used_now("primary", current=P_PRIMARY),  # P, not A, current on T2
        on_thread("peer after handoff", "peer-handoff-created", "T1"),  # used on the thread that enabled it
        without("peer enabled", "peer-handoff-created"),  # no thread recorded as enabling it: nothing moved
    ], holds_too=[[used_now("created"), used_now("primary")]]),
    "peer.copies-between-contexts": Case("peer.json", breaks=[
        edit("peer after handoff", "peer-handoff-created", memcpy_peer="CUDA_ERROR_INVALID_VALUE"),
        edit("peer after handoff", "peer-handoff-primary", dtod=SILENT),
        # both copies failing the same way is no success
        edit("peer after handoff", "peer-handoff-created", memcpy_peer="CUDA_ERROR_INVALID_VALUE",
             dtod="CUDA_ERROR_INVALID_VALUE"),
    ]),
    "peer.set-device-per-thread": Case("peer.json", breaks=[
        edit("thread devices", "thread-devices", b_start=1),  # A's cudaSetDevice reached B
        edit("thread devices", "thread-devices", b_end=1),
        edit("thread devices", "thread-devices", a_end=0),  # B's call moved A back
        edit("thread devices", "thread-devices", a_after_set=0),
        edit("thread devices", "thread-devices", b_start=1, b_end=1),  # a per-process device: B saw A's all along
    ]),
}
