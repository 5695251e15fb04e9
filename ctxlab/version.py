"""ctxlab's version: recorded in every result (which judges gave its verdicts). At the bottom of the layers so
that the harness, the CLI and the reports read it without importing the package's API."""

__version__ = "0.2.0"
