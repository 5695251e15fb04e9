"""``python -m ctxlab``: the command line, with its signal handlers in place before the heavy imports, so that a
Ctrl-C or SIGTERM while they load ends it as it would any later (``ctxlab.interrupts``)."""

from ctxlab.interrupts import handling_signals

with handling_signals(process_exit=True):
    from ctxlab.cli import main

    main()
