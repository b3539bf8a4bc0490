"""pldemu: run pld.tensor.* distributed collectives for real across MPI ranks."""

__version__ = "0.1.0"
