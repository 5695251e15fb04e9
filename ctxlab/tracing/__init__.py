"""Tracing: ctxlab's CUPTI callback in C (``native``), the tracer that drives it in the traced process
(``tracer``), the parameters it keeps (``fields``), the user's frames (``frames``) and threads
(``threads``) of each call, the program runner (``program``), the ordered calls made of the events
(``calls``), and the flight recorder: the records written to shared memory (``flight``) that a parent
process reads however the traced program ends (``supervise`` runs the program in a child, ``child`` is that
child).

Nothing here loads a CUDA library at import time.
"""
