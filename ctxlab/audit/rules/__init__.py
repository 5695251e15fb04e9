"""The rules: each a query on the models, declared in the catalogue (``catalogue.py``: ``RULES``, ``judge``)
by family: contexts, handles, lifetimes, ordering, classes, settings, failures, the recording, and how the
program ended (``endings.py``)."""
