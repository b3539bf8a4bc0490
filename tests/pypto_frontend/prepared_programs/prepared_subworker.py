"""SubWorkers (pldemu's own programs in pypto's style): a Python task on the host between two rounds of
device work, in the process that called the program (so its closures see this test's state), after the
dispatches that produce its arguments and before those that consume what it wrote; HOST
``pl.create_tensor`` intermediates; return-style calls; callbacks bound at ``prepare``; a SubWorker that
raises."""

import pypto.language as pl
import pypto.language.distributed as pld
import pytest
import torch
from pypto import ir
from pypto.ir.distributed_compiled_program import DistributedConfig
from pypto.runtime.distributed_runner import _tensor_from_continuous

R, C = 8, 32


def two_rounds(n: int):
    """y[r] = 2 * (2 * x[r] + 1): a device round, the SubWorker ``add_one`` on the host, a device round."""

    @pl.program
    class TwoRounds:
        @pl.function(type=pl.FunctionType.InCore)
        def twice(self, x: pl.Tensor[[R, C], pl.FP32], y: pl.Out[pl.Tensor[[R, C], pl.FP32]]) -> pl.Tensor[[R, C], pl.FP32]:
            t = pl.load(x, [0, 0], [R, C])
            return pl.store(pl.add(t, t), [0, 0], y)

        @pl.function(type=pl.FunctionType.Orchestration)
        def chip(self, x: pl.Tensor[[R, C], pl.FP32], y: pl.Out[pl.Tensor[[R, C], pl.FP32]]) -> pl.Tensor[[R, C], pl.FP32]:
            return self.twice(x, y)

        @pl.function(level=pl.Level.HOST, role=pl.Role.SubWorker)
        def add_one(t: pl.Tensor[[n, R, C], pl.FP32], u: pl.Out[pl.Tensor[[n, R, C], pl.FP32]]):
            u[:] = t + 1.0

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host(self, x: pl.Tensor[[n, R, C], pl.FP32], y: pl.Out[pl.Tensor[[n, R, C], pl.FP32]]) -> pl.Tensor[[n, R, C], pl.FP32]:
            mid: pl.Tensor[[n, R, C], pl.FP32] = pl.create_tensor([n, R, C], dtype=pl.FP32)
            more: pl.Tensor[[n, R, C], pl.FP32] = pl.create_tensor([n, R, C], dtype=pl.FP32)
            for r in pl.range(pld.world_size()):
                self.chip(x[r], mid[r], device=r)
            self.add_one(mid, more)
            for r in pl.range(pld.world_size()):
                self.chip(more[r], y[r], device=r)
            return y

    return TwoRounds


@pl.program
class Checked:
    """f = a + b on one device, then the abstract SubWorker ``check`` (bound at prepare) looks at f."""

    @pl.function(type=pl.FunctionType.InCore)
    def add(self, a: pl.Tensor[[R, C], pl.FP32], b: pl.Tensor[[R, C], pl.FP32],
            f: pl.Out[pl.Tensor[[R, C], pl.FP32]]) -> pl.Tensor[[R, C], pl.FP32]:
        return pl.store(pl.add(pl.load(a, [0, 0], [R, C]), pl.load(b, [0, 0], [R, C])), [0, 0], f)

    @pl.function(type=pl.FunctionType.Orchestration)
    def chip(self, a: pl.Tensor[[R, C], pl.FP32], b: pl.Tensor[[R, C], pl.FP32],
             f: pl.Out[pl.Tensor[[R, C], pl.FP32]]) -> pl.Tensor[[R, C], pl.FP32]:
        return self.add(a, b, f)

    @pl.function(level=pl.Level.HOST, role=pl.Role.SubWorker)
    def check(f: pl.Tensor[[R, C], pl.FP32]):
        ...

    @pl.function(level=pl.Level.HOST, role=pl.Role.SubWorker)
    def must_be_five(f: pl.Tensor[[R, C], pl.FP32]):
        if not torch.equal(f, torch.full((R, C), 5.0)):
            raise AssertionError(f"must_be_five: got {f[0, 0].item()}")

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host(self, a: pl.Tensor[[R, C], pl.FP32], b: pl.Tensor[[R, C], pl.FP32],
             f: pl.Out[pl.Tensor[[R, C], pl.FP32]]) -> pl.Tensor[[R, C], pl.FP32]:
        out: pl.Tensor[[R, C], pl.FP32] = self.chip(a, b, f)
        self.check(out)
        self.must_be_five(out)
        return out


def _compile(program, n, device_ids):
    if len(device_ids) < n:
        pytest.skip(f"needs {n} devices, got {device_ids}")
    return ir.compile(program, distributed_config=DistributedConfig(device_ids=device_ids[:n], num_sub_workers=1))


@pytest.mark.parametrize("devices", [1, 2, 3, 4])
def test_a_host_task_between_two_device_rounds(device_ids, devices):
    compiled = _compile(two_rounds(devices), devices, device_ids)
    x = torch.stack([torch.full((R, C), float(r)) for r in range(devices)])
    y = compiled(x)  # return-style: the Out parameter is allocated and returned
    for r in range(devices):
        assert torch.equal(y[r], torch.full((R, C), 4.0 * r + 2.0)), (r, y[r, 0, 0].item())


def test_a_callback_sees_this_process_and_the_device_result(device_ids):
    compiled = _compile(Checked, 1, device_ids)
    seen = []
    with compiled.prepare(callbacks={"check": lambda args: seen.append(_tensor_from_continuous(args[0]).clone())}) as rt:
        for _ in range(3):
            f = torch.zeros((R, C))
            rt(torch.full((R, C), 2.0), torch.full((R, C), 3.0), f)
    assert len(seen) == 3 and all(torch.equal(s, torch.full((R, C), 5.0)) for s in seen)


def test_an_unbound_abstract_sub_worker_is_refused_at_prepare(device_ids):
    compiled = _compile(Checked, 1, device_ids)
    with pytest.raises(ValueError, match=r"\['check'\] are runtime-bound callbacks"):
        compiled.prepare()
    with pytest.raises(TypeError, match="must accept a single positional argument"):
        compiled.prepare(callbacks={"check": lambda a, b: None})


def test_a_sub_worker_that_raises(device_ids):
    compiled = _compile(Checked, 1, device_ids)
    with compiled.prepare(callbacks={"check": lambda args: None}) as rt:
        rt(torch.full((R, C), 2.0), torch.full((R, C), 4.0), torch.zeros((R, C)))
