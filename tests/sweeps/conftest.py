"""The sweeps tests use the runs tests' fixtures: the testbed in the registry, a coordinator, a real worker."""

from tests.runs.conftest import coordinator, registry, worker

__all__ = ["coordinator", "registry", "worker"]
