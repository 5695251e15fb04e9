"""Result records in one package, below the harness and the reports (which know records only):

- ``schema``: the names a ctxlab/1 document is written in (the schema, verdicts, claim kinds);
- ``model``: the immutable records (``LabResult``, ``ClaimResult``, ``Observation``) and their JSON;
- ``shapes``: a decoded document's shape, checked before records are built from it;
- ``files``: reading a result file safely (bounded, strict JSON, then the shape);
- ``evidence``: evidence as drift and the fleet view compare it.
- ``skips``: why a claim was not judged, as a structure the run's own environment record is checked against;
- ``promise``: what a check level promises on a machine, and whether the runs kept it.
"""
