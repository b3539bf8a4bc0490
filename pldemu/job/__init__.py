"""The launcher side of a job, which never imports mpi4py.

Placement and ``mpiexec`` (``launch``), the checks before a job starts (``precheck``, ``resources``,
``outputs``, ``prelaunch``, and ``load``: source -> parse -> verify -> lower -> verify -> prechecks),
the ``.npy`` buffer files (``buffer_io``, ``run_io``), a stress child's outcome file (``outcome``),
the exit codes and the usage error (``exits``), and the runtime-flag table with its argv forwarding
(``flags``, parsing with ``argtypes``). A test imports all of it and runs the prechecks with mpi4py
left unimported.
"""
