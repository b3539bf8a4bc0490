"""pl.jit's specialisation rules on programs of our own: scalar arguments baked into the program and
part of the cache key, ``pl.RUNTIME`` kept a runtime scalar in signature mode, bare ``pl.Tensor``
annotations typed by the arguments, ``t.shape`` / ``t.dtype`` / ``bind_dynamic``, keyword dependency
arguments, ``self.<function>`` from a jit body, ``pl.jit.opaque`` / ``auto_scope=`` / ``level=``, a
single-device ``@pl.jit`` entry and ``lower()``. Run through ``pldemu pytest``."""

import pypto.language as pl
import pypto.language.distributed as pld
import pytest
import torch
from jit_helpers import stage
from pypto.ir.distributed_compiled_program import DistributedConfig
from pypto.runtime import RunConfig

ROWS = pl.dynamic("ROWS")
ONE = pl.dynamic("ONE")
COLS = 32


@pl.jit.incore(level=pl.Level.AIC)
def scale_row(x: pl.Tensor, y: pl.Out[pl.Tensor], factor: pl.Scalar[pl.FP32], bias: pl.Scalar[pl.FP32]):
    t = pl.load(x, [0, 0], [1, x.shape[1]])
    t = pl.mul(t, factor)
    t = pl.add(t, bias)
    return pl.store(t, [0, 0], y)


@pl.jit(auto_scope=False)
def scaled(x: pl.Tensor, y: pl.Out[pl.Tensor], factor: float, bias: float = 0.5):
    # keywords in a dependency call, in another order than the parameters
    return scale_row(x, y, bias=bias, factor=factor)


def test_single_device_entry_specialises_its_scalars():
    x = torch.arange(COLS, dtype=torch.float32).reshape(1, COLS)
    y = torch.zeros((1, COLS))
    scaled(x, y, 2.0)
    assert torch.equal(y, x * 2.0 + 0.5)
    first = scaled.compile(x, y, 2.0)
    assert scaled.compile(x, y, 2.0) is first
    assert scaled.compile(x, y, 3.0) is not first  # a scalar is part of the key
    assert scaled.compile(x, y, 2.0, bias=1.0) is not first
    text = str(scaled.lower(x, y, 3.0))
    assert "tile.muls(t, 3.0)" in text and "tile.adds(t, 0.5)" in text, text


BLOCK = 8


@pl.jit.incore
def double_block(t: pl.Tensor[[ROWS, COLS], pl.FP32], o: pl.Out[pl.Tensor[[ROWS, COLS], pl.FP32]]):
    # ROWS here is this kernel's own: the block's 8 rows, not the caller's ROWS
    v = pl.load(t, [0, 0], [ROWS, COLS])
    return pl.store(pl.add(v, v), [0, 0], o)


@pl.jit.inline
def block_sum(t: pl.Tensor, y: pl.Out[pl.Tensor]):
    t.bind_dynamic(0, ROWS)  # the dependency's declared dim: bound to this call's 8 rows
    with pl.at(level=pl.Level.CORE_GROUP):
        s = pl.load(t, [0, 0], [ROWS, COLS])
        y[0:1, :] = pl.col_sum(s)
    return y


@pl.jit
def blocks_doubled_and_summed(x: pl.Tensor[[ROWS, COLS], pl.FP32], y: pl.Out[pl.Tensor[[1, COLS], pl.FP32]]):
    # the caller binds ROWS to x's rows (24); its dependencies bind their own ROWS to 8
    block = pl.create_tensor([BLOCK, COLS], dtype=pl.FP32)
    block = double_block(x[BLOCK:2 * BLOCK, :], block)
    y = block_sum(block, y)
    return y


def test_a_dependency_declares_its_own_dynamic_dims():
    x = torch.arange(3 * BLOCK * COLS, dtype=torch.float32).reshape(3 * BLOCK, COLS)
    y = torch.zeros((1, COLS))
    blocks_doubled_and_summed(x, y)
    assert torch.equal(y, (x[BLOCK:2 * BLOCK] * 2).sum(0, keepdim=True))


@pl.jit.incore
def publish(
    x: pl.Tensor[[1, COLS], pl.FP32],
    y: pl.Out[pl.Tensor[[1, COLS], pl.FP32]],
    box: pld.DistributedTensor[[1, COLS], pl.FP32],
    sig: pld.DistributedTensor[[1, 1], pl.INT32],
    steps: pl.Scalar[pl.INT32],
):
    ctx = pld.get_comm_ctx(box)
    me = pld.rank(ctx)
    n = pld.nranks(ctx)
    box = stage(x, box, COLS)
    pld.system.notify(sig, peer=(me + 1) % n, offsets=[0, 0], value=1, op=pld.NotifyOp.AtomicAdd)
    pld.system.wait(sig, offsets=[0, 0], expected=1, cmp=pld.WaitCmp.Ge)
    acc = pld.tile.remote_load(box, peer=(me + n - 1) % n, offsets=[0, 0], shape=[1, COLS])
    for _ in pl.range(steps):
        acc = pl.add(acc, acc)
    return pl.store(acc, [0, 0], y)


@pl.jit
def publish_rank(
    x: pl.Tensor[[1, COLS], pl.FP32],
    y: pl.Out[pl.Tensor[[1, COLS], pl.FP32]],
    box: pld.DistributedTensor[[1, COLS], pl.FP32],
    sig: pld.DistributedTensor[[1, 1], pl.INT32],
    steps: pl.Scalar[pl.INT32],
):
    x.bind_dynamic(0, ONE)  # the specializer deletes the statement
    return self.publish(x, y, box, sig, steps=steps)  # noqa: F821  (pypto's generated class has it)


@pl.jit.host
def publish_all(
    x: pl.Tensor[[ROWS, 1, COLS], pl.FP32],
    y: pl.Out[pl.Tensor[[ROWS, 1, COLS], pl.FP32]],
    steps: pl.Scalar[pl.INT32],
):
    x.bind_dynamic(0, ROWS)
    box_buf = pld.alloc_window_buffer([1, x.shape[2]], dtype=x.dtype)
    sig_buf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        box = pld.window(box_buf, [1, COLS], dtype=pl.FP32)
        sig = pld.window(sig_buf, [1, 1], dtype=pl.INT32)
        publish_rank(x[r], y[r], box, sig, steps, device=r)


def _config(devices):
    return RunConfig(distributed_config=DistributedConfig(device_ids=devices))


@pytest.mark.parametrize("devices", [1, 2, 3, 4, 5])
def test_scalars_and_keywords_at_every_rank_count(device_ids, devices):
    if len(device_ids) < devices:
        pytest.skip(f"needs {devices} devices, got {device_ids}")
    x = torch.stack([torch.full((1, COLS), float(r + 1)) for r in range(devices)])
    y = torch.zeros((devices, 1, COLS))
    publish_all(x, y, 3, config=_config(device_ids[:devices]))
    expected = torch.stack([x[(r - 1) % devices] * 8 for r in range(devices)])
    assert torch.equal(y, expected)


def test_runtime_scalar_in_signature_mode(device_ids):
    if len(device_ids) < 2:
        pytest.skip("needs 2 devices")
    compiled = publish_all.compile(steps=pl.RUNTIME, config=_config(device_ids[:2]))
    assert publish_all.compile(steps=pl.RUNTIME, config=_config(device_ids[:2])) is compiled
    names = [p.name for p in compiled._get_metadata()[0]]
    assert names == ["x", "y", "steps"]
    x = torch.ones((2, 1, COLS))
    for steps in (0, 2):  # one artifact, the value read at each call
        y = torch.zeros((2, 1, COLS))
        compiled(x, y, steps)
        assert torch.equal(y, x * 2**steps)


def test_runtime_marker_on_a_real_call_is_refused(device_ids):
    with pytest.raises(TypeError, match=r"pl\.RUNTIME, which is a compile-time marker"):
        publish_all(torch.ones((1, 1, COLS)), torch.zeros((1, 1, COLS)), pl.RUNTIME)
