"""Cases for migrate's claims (see tests/claim_cases/__init__.py)."""

from tests.claim_cases import Case, Edit, both, change, edit, recorded_now

F = "migrate.json"
GREEN = "migrate-green.json"  # migrate --context both on the H200: the green scenarios
SILENT = "silent-wrong-result (got 0, expected 1860304897)"
FINAL = {"element_added_min": 12, "element_added_max": 12, "global": 1036}  # right after migrate.json's 12 handoffs

CTX = 0x7F9240001000  # the context a concurrent scenario made, as its check records it
WORKED = {"current": CTX, "pointer_context": CTX, "ok": True}  # a thread's driver work in it


def checked_now(scenario: str | None = None, **changes) -> Edit:
    """The check of a concurrent scenario as the child records it now: each thread's driver work, A's current
    context at the check and the context made, none of its own comparisons (both_current, both_worked); then
    ``changes`` (``threads__B__ok=False``...)."""
    what = "current on two threads"
    now = recorded_now(what, scenario, ("both_current", "both_worked"), threads={"A": WORKED, "B": WORKED},
                       still=CTX, context=CTX)
    return both(now, edit(what, scenario, **changes)) if changes else now


CASES: dict[str, Case] = {
    "migrate.state-follows-context": Case(F, breaks=[
        edit("handoffs verified", "handoff-created", verified=11, mismatches=1,
             first_mismatch={"check": "global left by the previous thread", "seen": 1003, "expected": 1006}),
        edit("handoffs verified", "handoff-primary", final_ok=False),
        # each sign of a lost relay alone: a mismatch counted, a handoff not verified
        edit("handoffs verified", "handoff-created", mismatches=1),
        edit("handoffs verified", "handoff-created", verified=11),
        # the read-back recorded raw (12 handoffs: every element +12, the global 1000 + 3 * 12), the relay's own
        # final_ok left saying True: the claim decides from what was read
        edit("handoffs verified", "handoff-primary", final=None),
        edit("handoffs verified", "handoff-primary", final=FINAL | {"element_added_min": 11}),
        edit("handoffs verified", "handoff-primary", final=FINAL | {"element_added_max": 13}),
        edit("handoffs verified", "handoff-primary", final=FINAL | {"element_added_min": 13, "element_added_max": 13}),
        edit("handoffs verified", "handoff-primary", final=FINAL | {"global": 1037}),
        edit("handoffs verified", "handoff-primary", final=FINAL | {"global": 1033}),
    ], holds_too=[
        [edit("handoffs verified", "handoff-primary", final=FINAL),
         edit("handoffs verified", "handoff-created", final=FINAL)],
        # the raw values decide, not the child's final_ok
        [edit("handoffs verified", "handoff-primary", final=FINAL, final_ok=False)],
    ]),
    "migrate.pointer-belongs-to-context": Case(F, breaks=[
        edit("allocation context", "concurrent-created", where=lambda v: True, pointer_context=0x1234),
    ]),
    # migrate.json was recorded before the check recorded what it compares: the child's both_current and
    # both_worked decide there; checked_now is the check as recorded since, the claim comparing
    "migrate.current-on-several-threads": Case(F, breaks=[
        edit("current on two threads", "concurrent-primary", both_current=False),
        edit("current on two threads", "concurrent-created", both_worked=False),
        # both at once, one per kind: the counts agree (1 and 1) but each falls short of the two kinds
        both(edit("current on two threads", "concurrent-primary", both_current=False),
             edit("current on two threads", "concurrent-created", both_worked=False)),
        checked_now("concurrent-primary", threads__B__current=0),  # B had no context current
        checked_now("concurrent-created", still=0),  # A had lost it by the check
        checked_now("concurrent-created", context=0x1234),  # current on both, but not the context made
        checked_now("concurrent-primary", threads__B__ok=False),  # B's cuMemAlloc failed, A's worked
        checked_now("concurrent-created", threads__A__pointer_context=0x1234),  # A allocated elsewhere
        checked_now("concurrent-primary", **{"global": 1}),  # an increment lost, every allocation right
    ], holds_too=[
        [checked_now()],
        # both recordings in one run: each decides its own kind
        [checked_now("concurrent-created")],
    ]),
    # The handles compared are recorded (current_after, primary, pointer_context): the claim compares them.
    "migrate.runtime-binds-primary": Case(F, breaks=[
        change("runtime call without context", "unbound-created",
               lambda v: {"current_after": v["owner_context"], "pointer_context": v["owner_context"]}),
        # each condition alone: bound the primary context but allocated elsewhere, and the reverse
        change("runtime call without context", "unbound-created", lambda v: {"pointer_context": v["owner_context"]}),
        edit("runtime call without context", "unbound-primary", current_after=0x1234),
    ]),
    "migrate.driver-call-without-context": Case(F, breaks=[
        edit("driver call without context", "unbound-primary", status="CUDA_SUCCESS"),
    ]),
    # the claim compares what was read with what was written (a recording's read_ok is the child's, not read)
    "migrate.own-address-space": Case(F, keep=[
        edit("cross-context dereference", "cross-context", outcome="CUDA_ERROR_ILLEGAL_ADDRESS", value_read=None),
    ], breaks=[
        edit("cross-context dereference", "cross-context", outcome="CUDA_SUCCESS", value_read=0x5EEDCAFE),
    ], holds_too=[
        # read back, but not what was written: not the owner's memory
        [edit("cross-context dereference", "cross-context", value_read=0x5EEDCAFF, read_ok=True)],
    ]),
    # Green contexts: the H200's migrate --context both run.
    "migrate.green-state-follows-context": Case(GREEN, breaks=[
        edit("handoffs verified", "handoff-green", verified=11, mismatches=1,
             first_mismatch={"check": "array pointer context", "seen": 1, "expected": 2}),
        edit("handoffs verified", "handoff-green", final_ok=False),
        edit("handoffs verified", "handoff-green", mismatches=1),
        edit("handoffs verified", "handoff-green", verified=11),
        edit("handoffs verified", "handoff-green", final=None),
        edit("handoffs verified", "handoff-green", final=FINAL | {"element_added_min": 11}),
        edit("handoffs verified", "handoff-green", final=FINAL | {"element_added_max": 13}),
        edit("handoffs verified", "handoff-green", final=FINAL | {"element_added_min": 13, "element_added_max": 13}),
        edit("handoffs verified", "handoff-green", final=FINAL | {"global": 1037}),
    ], holds_too=[
        [edit("handoffs verified", "handoff-green", final=FINAL, final_ok=False)],
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
