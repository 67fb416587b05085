"""Client driver processes of the broker benchmark (``tests.bench.broker_bench``).

Each driver runs as ``python -m tests.bench.drivers.<name> COMMAND`` with one JSON line of
arguments on stdin, prints JSON lines on stdout (the last one ``{"event": "done", ...}``) and
exits by itself; see ``common``.
"""
