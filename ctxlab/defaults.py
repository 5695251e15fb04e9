"""Defaults the CLI shows in its help: kept apart so that ``ctxlab --help`` loads neither the lab model nor
the result loader (start-up time)."""

DEFAULT_REPEATS = 3  # runs of each undefined-behaviour scenario, each in a fresh process (check uses it too)
DEFAULT_MAX_BYTES = 64 * 2**20  # 64 MiB: the largest recorded check (two GPUs, every lab) is 0.3 MiB
