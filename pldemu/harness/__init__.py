"""Run K calls of a program or a collective on every rank and judge them.

The block loop (``blocks``: one run context whose hooks order every checker's host-side work, and
``run_blocks``), the harnesses built on it (``check``, ``repeat``, ``stress``, the tile and MX checks),
their references (``data``, ``oracle``, the native MPI calls) and the single run of ``pldemu run`` /
``pldemu.launch`` (``run``: ``run_once``, and ``report``, its printed and JSON forms). Everything here
runs inside the MPI job.
"""
