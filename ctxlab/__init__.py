"""ctxlab: experiments that show how CUDA contexts behave.

Importing ctxlab never imports CUDA: everything that touches the driver lives
in ``ctxlab.cuda`` and is imported lazily.
"""

__version__ = "0.1.0"
