"""What runs in the traced process beside the user's program: the observer that starts the tracer and
runs the program, the allocator and library hooks, the fork and hand-over watches; their notes go to the
flight recorder beside the calls."""
