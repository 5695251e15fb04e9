"""Cases for migrate's claims (see tests/claim_cases/__init__.py)."""

from tests.claim_cases import Case, both, edit

F = "migrate.json"
GREEN = "migrate-green.json"  # migrate --context both on the H200: the green scenarios
SILENT = "silent-wrong-result (got 0, expected 1860304897)"

CASES: dict[str, Case] = {
    "migrate.state-follows-context": Case(F, breaks=[
        edit("handoffs verified", "handoff-created", verified=11, mismatches=1,
             first_mismatch={"check": "global left by the previous thread", "seen": 1003, "expected": 1006}),
        edit("handoffs verified", "handoff-primary", final_ok=False),
    ]),
    "migrate.pointer-belongs-to-context": Case(F, breaks=[
        edit("allocation context", "concurrent-created", where=lambda v: True, pointer_context=0x1234),
    ]),
    "migrate.current-on-several-threads": Case(F, breaks=[
        edit("current on two threads", "concurrent-primary", both_current=False),
        edit("current on two threads", "concurrent-created", both_worked=False),
        # both at once, one per kind: the counts agree (1 and 1) but each falls short of the two kinds
        both(edit("current on two threads", "concurrent-primary", both_current=False),
             edit("current on two threads", "concurrent-created", both_worked=False)),
    ]),
    "migrate.runtime-binds-primary": Case(F, breaks=[
        edit("runtime call without context", "unbound-created", bound_primary=False, allocation_in_primary=False,
             allocation_in_owner=True),
        # each condition alone: bound the primary context but allocated elsewhere, and the reverse
        edit("runtime call without context", "unbound-created", allocation_in_primary=False, allocation_in_owner=True),
        edit("runtime call without context", "unbound-primary", bound_primary=False),
    ]),
    "migrate.driver-call-without-context": Case(F, breaks=[
        edit("driver call without context", "unbound-primary", status="CUDA_SUCCESS"),
    ]),
    "migrate.own-address-space": Case(F, keep=[
        edit("cross-context dereference", "cross-context", outcome="CUDA_ERROR_ILLEGAL_ADDRESS", value_read=None,
             read_ok=False),
    ], breaks=[
        edit("cross-context dereference", "cross-context", outcome="CUDA_SUCCESS", value_read=0x5EEDCAFE,
             read_ok=True),
    ]),
    # Green contexts: the H200's migrate --context both run.
    "migrate.green-state-follows-context": Case(GREEN, breaks=[
        edit("handoffs verified", "handoff-green", verified=11, mismatches=1,
             first_mismatch={"check": "array pointer context", "seen": 1, "expected": 2}),
        edit("handoffs verified", "handoff-green", final_ok=False),
    ]),
    "migrate.green-sm-partition": Case(GREEN, breaks=[
        edit("green sm ids", "green-sm", null_stream_distinct=132),
        edit("green sm ids", "green-sm", green_stream_distinct=17),
        edit("green sm ids", "green-sm", null_stream_distinct=0),
    ], holds_too=[
        [edit("green sm ids", "green-sm", null_stream_distinct=1)],  # every block on one SM: still in the group
    ]),
    "migrate.green-memory-shared-with-primary": Case(GREEN, breaks=[
        edit("green allocation", "green-memory", primary_reads_green=SILENT),
        edit("green allocation", "green-memory", green_reads_primary="CUDA_ERROR_ILLEGAL_ADDRESS"),
        # refused alike both ways: the two reads agree, and neither is right
        edit("green allocation", "green-memory", primary_reads_green="CUDA_ERROR_ILLEGAL_ADDRESS",
             green_reads_primary="CUDA_ERROR_ILLEGAL_ADDRESS"),
    ]),
}
