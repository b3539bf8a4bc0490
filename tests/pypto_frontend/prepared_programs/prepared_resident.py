"""Prepared workers with resident weights (pldemu's own programs in pypto's style): a weight uploaded once
and reused by bounded submits, stacked weights one shard per device (identity and permuted placement),
a resident output read back raw, and the worker's contracts (close, register, ambiguity, placement)."""

import pypto.language as pl
import pypto.language.distributed as pld
import pytest
import torch
from pypto import ir
from pypto.ir.distributed_compiled_program import DistributedConfig

ROWS, COLS = 8, 32


@pl.program
class ScaleAdd:
    """y = x + w on one device: w is the resident weight."""

    @pl.function(type=pl.FunctionType.InCore)
    def kernel(self, x: pl.Tensor[[ROWS, COLS], pl.FP32], w: pl.Tensor[[ROWS, COLS], pl.FP32],
               y: pl.Out[pl.Tensor[[ROWS, COLS], pl.FP32]]) -> pl.Tensor[[ROWS, COLS], pl.FP32]:
        s = pl.add(pl.load(x, [0, 0], [ROWS, COLS]), pl.load(w, [0, 0], [ROWS, COLS]))
        return pl.store(s, [0, 0], y)

    @pl.function(type=pl.FunctionType.Orchestration)
    def chip(self, x: pl.Tensor[[ROWS, COLS], pl.FP32], w: pl.Tensor[[ROWS, COLS], pl.FP32],
             y: pl.Out[pl.Tensor[[ROWS, COLS], pl.FP32]]) -> pl.Tensor[[ROWS, COLS], pl.FP32]:
        return self.kernel(x, w, y)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host(self, x: pl.Tensor[[ROWS, COLS], pl.FP32], w: pl.Tensor[[ROWS, COLS], pl.FP32],
             y: pl.Out[pl.Tensor[[ROWS, COLS], pl.FP32]]) -> pl.Tensor[[ROWS, COLS], pl.FP32]:
        out: pl.Tensor[[ROWS, COLS], pl.FP32] = self.chip(x, w, y)
        return out


NR = pl.dynamic("NR")


def stacked_program(permuted: bool):
    """y[i] = x[i] + w[i] with shard i dispatched to device i, or (permuted, 3 devices) to device 2 - i."""

    @pl.program
    class StackedAdd:
        @pl.function(type=pl.FunctionType.InCore)
        def kernel(self, x: pl.Tensor[[ROWS, COLS], pl.FP32], w: pl.Tensor[[ROWS, COLS], pl.FP32],
                   y: pl.Out[pl.Tensor[[ROWS, COLS], pl.FP32]]) -> pl.Tensor[[ROWS, COLS], pl.FP32]:
            s = pl.add(pl.load(x, [0, 0], [ROWS, COLS]), pl.load(w, [0, 0], [ROWS, COLS]))
            return pl.store(s, [0, 0], y)

        @pl.function(type=pl.FunctionType.Orchestration)
        def chip(self, x: pl.Tensor[[ROWS, COLS], pl.FP32], w: pl.Tensor[[ROWS, COLS], pl.FP32],
                 y: pl.Out[pl.Tensor[[ROWS, COLS], pl.FP32]]) -> pl.Tensor[[ROWS, COLS], pl.FP32]:
            return self.kernel(x, w, y)

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host(self, x: pl.Tensor[[NR, ROWS, COLS], pl.FP32], w: pl.Tensor[[NR, ROWS, COLS], pl.FP32],
                 y: pl.Out[pl.Tensor[[NR, ROWS, COLS], pl.FP32]]) -> pl.Tensor[[NR, ROWS, COLS], pl.FP32]:
            for r in pl.range(pld.world_size()):
                self.chip(x[r], w[r], y[r], device=r)
            return y

    @pl.program
    class PermutedAdd:
        @pl.function(type=pl.FunctionType.InCore)
        def kernel(self, x: pl.Tensor[[ROWS, COLS], pl.FP32], w: pl.Tensor[[ROWS, COLS], pl.FP32],
                   y: pl.Out[pl.Tensor[[ROWS, COLS], pl.FP32]]) -> pl.Tensor[[ROWS, COLS], pl.FP32]:
            s = pl.add(pl.load(x, [0, 0], [ROWS, COLS]), pl.load(w, [0, 0], [ROWS, COLS]))
            return pl.store(s, [0, 0], y)

        @pl.function(type=pl.FunctionType.Orchestration)
        def chip(self, x: pl.Tensor[[ROWS, COLS], pl.FP32], w: pl.Tensor[[ROWS, COLS], pl.FP32],
                 y: pl.Out[pl.Tensor[[ROWS, COLS], pl.FP32]]) -> pl.Tensor[[ROWS, COLS], pl.FP32]:
            return self.kernel(x, w, y)

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host(self, x: pl.Tensor[[3, ROWS, COLS], pl.FP32], w: pl.Tensor[[3, ROWS, COLS], pl.FP32],
                 y: pl.Out[pl.Tensor[[3, ROWS, COLS], pl.FP32]]) -> pl.Tensor[[3, ROWS, COLS], pl.FP32]:
            self.chip(x[0], w[0], y[0], device=2)
            self.chip(x[1], w[1], y[1], device=1)
            self.chip(x[2], w[2], y[2], device=0)
            return y

    return PermutedAdd if permuted else StackedAdd


def _compile(program, n, device_ids):
    if len(device_ids) < n:
        pytest.skip(f"needs {n} devices, got {device_ids}")
    return ir.compile(program, distributed_config=DistributedConfig(device_ids=device_ids[:n]))


def test_a_resident_weight_serves_three_bounded_submits(device_ids):
    compiled = _compile(ScaleAdd, 1, device_ids)
    xs = [torch.full((ROWS, COLS), v).share_memory_() for v in (2.0, 7.0, 11.0)]
    ys = [torch.zeros((ROWS, COLS)).share_memory_() for _ in xs]
    w = torch.full((ROWS, COLS), 3.0)
    with compiled.prepare() as rt:
        weight = rt.alloc_tensor((ROWS, COLS), torch.float32, init=w)
        w.zero_()  # uploaded once: the host copy no longer matters
        handles = [rt.submit(compiled, x, weight, y) for x, y in zip(xs, ys, strict=True)]
        for h, y, want in zip(handles, ys, (5.0, 10.0, 14.0), strict=True):
            h.result()
            assert torch.equal(y, torch.full((ROWS, COLS), want))
        assert all(h.done() for h in handles)
        rt.free_tensor(weight)
        rt.free_tensor(weight)  # idempotent


def test_a_resident_output_is_read_back_raw(device_ids):
    compiled = _compile(ScaleAdd, 1, device_ids)
    x = torch.full((ROWS, COLS), 1.5).share_memory_()
    with compiled.prepare() as rt:
        weight = rt.alloc_tensor((ROWS, COLS), torch.float32, init=torch.full((ROWS, COLS), 0.5))
        out = rt.alloc_tensor((ROWS, COLS), torch.float32)
        rt(x, weight, out)
        back = torch.zeros((ROWS, COLS))
        rt.copy_from(back.data_ptr(), out.data_ptr, out.nbytes)
        assert torch.equal(back, torch.full((ROWS, COLS), 2.0))


@pytest.mark.parametrize("devices", [1, 2, 3, 4, 5])
def test_stacked_weights_one_shard_per_device(device_ids, devices):
    compiled = _compile(stacked_program(False), devices, device_ids)
    w = torch.stack([torch.full((ROWS, COLS), 10.0 + i) for i in range(devices)])
    x = torch.stack([torch.full((ROWS, COLS), float(i)) for i in range(devices)]).share_memory_()
    y = torch.zeros((devices, ROWS, COLS)).share_memory_()
    with compiled.prepare(persistent=True) as rt:
        weight = rt.alloc_stacked_tensor(w)
        for step in range(2):
            for i in range(devices):
                x[i].fill_(float(i + 1 + step))
            rt(x, weight, y)
            for i in range(devices):
                assert torch.equal(y[i], torch.full((ROWS, COLS), 10.0 + 2 * i + 1 + step))
        back = torch.zeros((devices, ROWS, COLS))
        rt.copy_stacked_from(weight, back)
        assert torch.equal(back, w)
        rt.free_stacked_tensor(weight)


def test_permuted_placement_follows_worker_ids(device_ids):
    compiled = _compile(stacked_program(True), 3, device_ids)
    w = torch.stack([torch.full((ROWS, COLS), 100.0 * i) for i in range(3)])
    x = torch.ones((3, ROWS, COLS)).share_memory_()
    y = torch.zeros((3, ROWS, COLS)).share_memory_()
    with compiled.prepare() as rt:
        weight = rt.alloc_stacked_tensor(w, worker_ids=[2, 1, 0])
        rt(x, weight, y)
        assert [y[i, 0, 0].item() for i in range(3)] == [1.0, 101.0, 201.0]


def test_a_shard_on_the_wrong_device_is_refused(device_ids):
    compiled = _compile(stacked_program(False), 2, device_ids)
    w = torch.zeros((2, ROWS, COLS))
    with compiled.prepare() as rt:
        weight = rt.alloc_stacked_tensor(w, worker_ids=[1, 0])
        rt(torch.zeros((2, ROWS, COLS)), weight, torch.zeros((2, ROWS, COLS)))


def test_the_worker_s_contracts(device_ids):
    compiled = _compile(ScaleAdd, 1, device_ids)
    other = _compile(ScaleAdd, 1, device_ids)
    with pytest.raises(ValueError, match="requires persistent=True"):
        compiled.prepare(reset_persistent_windows=True)
    with pytest.raises(ValueError, match="are not sub-workers"):
        compiled.prepare(callbacks={"nope": print})
    rt = compiled.prepare(extra_compiled=[other])
    x, y = torch.ones((ROWS, COLS)), torch.zeros((ROWS, COLS))
    weight = rt.alloc_tensor((ROWS, COLS), torch.float32, init=torch.ones((ROWS, COLS)))
    with pytest.raises(TypeError, match="ambiguous"):
        rt(x, weight, y)
    handle = rt.register(other)
    handle(x, weight, y)
    assert torch.equal(y, torch.full((ROWS, COLS), 2.0))
    with pytest.raises(ValueError, match="registered when this worker was constructed"):
        rt.register(_compile(ScaleAdd, 1, device_ids))
    rt.close()
    rt.close()  # idempotent
    assert handle.closed
    with pytest.raises(RuntimeError, match=r"register\(\) called after close\(\)"):
        rt.register(compiled)
    with pytest.raises(RuntimeError, match=r"submit\(\) called after close\(\)"):
        rt.submit(compiled, x, weight, y)


@pl.program
class HugeScratch:
    """ScaleAdd whose orchestration also makes a 64 GiB scratch tensor: no dispatch of it fits."""

    @pl.function(type=pl.FunctionType.InCore)
    def kernel(self, x: pl.Tensor[[ROWS, COLS], pl.FP32], w: pl.Tensor[[ROWS, COLS], pl.FP32],
               y: pl.Out[pl.Tensor[[ROWS, COLS], pl.FP32]]) -> pl.Tensor[[ROWS, COLS], pl.FP32]:
        s = pl.add(pl.load(x, [0, 0], [ROWS, COLS]), pl.load(w, [0, 0], [ROWS, COLS]))
        return pl.store(s, [0, 0], y)

    @pl.function(type=pl.FunctionType.Orchestration)
    def chip(self, x: pl.Tensor[[ROWS, COLS], pl.FP32], w: pl.Tensor[[ROWS, COLS], pl.FP32],
             y: pl.Out[pl.Tensor[[ROWS, COLS], pl.FP32]]) -> pl.Tensor[[ROWS, COLS], pl.FP32]:
        scratch = pl.create_tensor([1 << 17, 1 << 17], dtype=pl.FP32)
        scratch = self.kernel(x, w, y)
        return scratch

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host(self, x: pl.Tensor[[ROWS, COLS], pl.FP32], w: pl.Tensor[[ROWS, COLS], pl.FP32],
             y: pl.Out[pl.Tensor[[ROWS, COLS], pl.FP32]]) -> pl.Tensor[[ROWS, COLS], pl.FP32]:
        out: pl.Tensor[[ROWS, COLS], pl.FP32] = self.chip(x, w, y)
        return out


def test_what_the_ranks_cannot_hold_is_refused_before_it_is_sent(device_ids):
    """A resident tensor or a dispatch larger than the machine: refused with its size, the worker still
    serving what fits (the kernel's out-of-memory killer would have ended a rank or the caller)."""
    compiled = _compile(ScaleAdd, 1, device_ids)
    x, y = torch.ones((ROWS, COLS)).share_memory_(), torch.zeros((ROWS, COLS)).share_memory_()
    with compiled.prepare() as rt:
        with pytest.raises(Exception, match=r"alloc_tensor\(\[1048576, 1048576\], torch.float32\) on worker 0 "
                                            r"needs 4096.0 GiB, but this machine has .* available"):
            rt.alloc_tensor((1 << 20, 1 << 20), torch.float32)
        weight = rt.alloc_tensor((ROWS, COLS), torch.float32, init=torch.full((ROWS, COLS), 2.0))
        rt(x, weight, y)
        assert torch.equal(y, torch.full((ROWS, COLS), 3.0))
    with pytest.warns(Warning, match="will be refused before its job starts"):  # compile tells it first
        huge = _compile(HugeScratch, 1, device_ids)
    with pytest.raises(Exception, match=r"HugeScratch on 1 devices: the job needs about 128.1 GiB"):
        huge(x, torch.ones((ROWS, COLS)), y)  # a plain call: its caller makes none of the scratch either
    with huge.prepare() as rt:
        weight = rt.alloc_tensor((ROWS, COLS), torch.float32, init=torch.full((ROWS, COLS), 2.0))
        with pytest.raises(Exception, match=r"HugeScratch on 1 devices: its dispatch needs 128.0 GiB beyond the "
                                            r"worker's processes: .*biggest buffers: scratch 64.0 GiB"):
            rt(x, weight, y)
