"""Running lab steps: named host threads in a fixed order, and child processes."""
