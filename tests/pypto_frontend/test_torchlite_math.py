"""The torch stand-in's element-wise math, limits, extremes and selection (``torch.cos`` / ``ceil`` / ``iinfo``
/ ``finfo`` / ``amax`` / ``uniform_`` / ``softmax`` / ``topk`` / ...), under torch's dtype rules, against
numpy references and torch's documented results."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

import pldemu.torchlite as torch


def test_float_math_of_an_int_tensor_is_float32_and_half_types_round_once() -> None:
    i = torch.arange(4, dtype=torch.int32)
    for fn, ref in ((torch.cos, np.cos), (torch.sin, np.sin), (torch.exp, np.exp), (torch.sqrt, np.sqrt)):
        out = fn(i)
        assert out.dtype is torch.float32
        np.testing.assert_array_equal(out.numpy(), ref(np.arange(4, dtype=np.float32)))
    h = torch.tensor([0.3, 1.7, 3.1], dtype=torch.bfloat16)
    want = np.cos(h.numpy().astype(np.float32)).astype(ml_dtypes.bfloat16)
    assert torch.cos(h).dtype is torch.bfloat16
    np.testing.assert_array_equal(torch.cos(h).numpy(), want)
    np.testing.assert_allclose(torch.rsqrt(torch.tensor([4.0])).numpy(), [0.5])
    np.testing.assert_allclose(torch.tensor([0.0]).sigmoid().numpy(), [0.5])


def test_rounding_functions_keep_integers_and_round_half_to_even() -> None:
    x = torch.tensor([-1.5, -0.5, 0.5, 1.5, 2.5, 1.2])
    assert torch.ceil(x).tolist() == [-1.0, -0.0, 1.0, 2.0, 3.0, 2.0]
    assert torch.floor(x).tolist() == [-2.0, -1.0, 0.0, 1.0, 2.0, 1.0]
    assert torch.round(x).tolist() == [-2.0, -0.0, 0.0, 2.0, 2.0, 1.0]
    assert torch.round(torch.tensor([1.25, 1.35]), decimals=1).tolist() == pytest.approx([1.2, 1.4])
    n = torch.tensor([3, -4], dtype=torch.int64)
    assert torch.ceil(n).dtype is torch.int64 and torch.ceil(n).tolist() == [3, -4]


def test_limits() -> None:
    i8 = torch.iinfo(torch.int8)
    assert (i8.bits, i8.min, i8.max, i8.dtype) == (8, -128, 127, "int8")
    assert torch.iinfo(torch.int64).max == 2**63 - 1
    f = torch.finfo(torch.bfloat16)
    assert (f.bits, f.eps, f.max, f.tiny) == (16, 2.0**-7, float(ml_dtypes.finfo(ml_dtypes.bfloat16).max), 2.0**-126)
    assert torch.finfo().eps == float(np.finfo(np.float32).eps)
    assert torch.finfo(torch.float16).max == 65504.0
    with pytest.raises(TypeError):
        torch.iinfo(torch.float32)
    with pytest.raises(TypeError):
        torch.finfo(torch.int32)
    assert torch.inf == math.inf and math.isnan(torch.nan)


def test_amax_amin_reduce_dims_and_propagate_nan() -> None:
    x = torch.tensor([[1.0, 5.0, -2.0], [4.0, 0.0, 3.0]])
    assert x.amax().item() == 5.0 and x.amin().item() == -2.0
    assert x.amax(dim=-1, keepdim=True).tolist() == [[5.0], [4.0]]
    assert torch.amin(x, dim=(0, 1)).item() == -2.0
    assert x.amax(dim=0).tolist() == [4.0, 5.0, 3.0]
    assert math.isnan(torch.tensor([1.0, float("nan")]).amax().item())
    with pytest.raises(RuntimeError, match="numel"):
        torch.zeros(0).amax()


def test_uniform_fills_in_place_within_bounds_and_is_seeded() -> None:
    torch.manual_seed(3)
    t = torch.empty(64, 8)
    assert t.uniform_(-2.0, 3.0) is t
    a = t.numpy().copy()
    assert a.min() >= -2.0 and a.max() < 3.0 and a.std() > 0.5
    torch.manual_seed(3)
    np.testing.assert_array_equal(torch.empty(64, 8).uniform_(-2.0, 3.0).numpy(), a)
    g = torch.Generator().manual_seed(1)
    b = torch.zeros(4, dtype=torch.bfloat16).uniform_(generator=g)
    assert b.dtype is torch.bfloat16 and (b.numpy().astype(np.float32) < 1).all()
    with pytest.raises(RuntimeError):
        torch.empty(2).uniform_(1.0, 0.0)


def test_clamp_min_softmax_and_selection() -> None:
    x = torch.tensor([[3.0, 1.0, 3.0, 2.0], [0.0, 5.0, 5.0, 1.0]])
    assert x.clamp_min(2.0).tolist() == [[3.0, 2.0, 3.0, 2.0], [2.0, 5.0, 5.0, 2.0]]
    assert x.clamp_max(2.0).tolist() == [[2.0, 1.0, 2.0, 2.0], [0.0, 2.0, 2.0, 1.0]]
    e = np.exp(x.numpy() - x.numpy().max(-1, keepdims=True))
    np.testing.assert_allclose(torch.softmax(x, -1).numpy(), e / e.sum(-1, keepdims=True), rtol=1e-6)
    values, indices = x.topk(2)
    assert values.tolist() == [[3.0, 3.0], [5.0, 5.0]] and indices.tolist() == [[0, 2], [1, 2]]  # ties: index order
    assert x.argsort(dim=-1, descending=True).tolist() == [[0, 2, 3, 1], [1, 2, 3, 0]]
    assert x.gather(1, torch.tensor([[3], [0]])).tolist() == [[2.0], [0.0]]
    assert x.index_select(1, torch.tensor([1, 1])).tolist() == [[1.0, 1.0], [5.0, 5.0]]
    assert [p.shape[1] for p in x.split(3, dim=1)] == [3, 1]
    assert x.unflatten(1, (2, -1)).shape == (2, 2, 2)
    assert x.nonzero().tolist()[:3] == [[0, 0], [0, 1], [0, 2]]
    assert x.t().shape == (4, 2) and x.narrow(1, 1, 2).tolist() == [[1.0, 3.0], [5.0, 5.0]]
    assert x.masked_fill(x > 2.5, -1.0).tolist() == [[-1.0, 1.0, -1.0, 2.0], [0.0, -1.0, -1.0, 1.0]]


def test_float8_round_trips_as_torch_casts_them() -> None:
    """e4m3fn: 3 mantissa bits, nearest with ties to even, largest finite 448, beyond it NaN (torch's cast
    does not saturate); e8m0fnu holds powers of two. Values worked by hand from the formats."""
    x = torch.tensor([1.0, 0.3, 0.296875, -0.3, 450.0, 500.0, 448.0, 2.0 ** -9])
    back = x.to(torch.float8_e4m3fn)
    assert back.dtype is torch.float8_e4m3fn and back.element_size() == 1
    got = back.float().tolist()
    assert got[:4] == [1.0, 0.3125, 0.3125, -0.3125]  # 0.296875 is the tie between 0.28125 and 0.3125
    assert got[4] == 448.0 and math.isnan(got[5]) and got[6] == 448.0 and got[7] == 2.0 ** -9
    p = torch.tensor([0.25, 1024.0]).to(torch.float8_e8m0fnu).float()
    assert p.tolist() == [0.25, 1024.0]
    with pytest.raises(RuntimeError, match="Promotion for Float8"):
        torch.promote_types(torch.float8_e4m3fn, torch.float32)


def test_bucketize_sign_std_and_method_arithmetic() -> None:
    edges = torch.tensor([0.25, 0.75, 1.25])
    x = torch.tensor([[0.0, 0.25, 0.5], [0.75, 1.3, 9.0]])
    assert torch.bucketize(x, edges).tolist() == [[0, 0, 1], [1, 3, 3]]
    assert torch.bucketize(x, edges, right=True).tolist() == [[0, 1, 1], [2, 3, 3]]
    assert torch.bucketize(x, edges).dtype is torch.int64
    assert torch.bucketize(x, edges, out_int32=True).dtype is torch.int32
    assert torch.sign(torch.tensor([-2.5, 0.0, 3.0])).tolist() == [-1.0, 0.0, 1.0]
    assert torch.tensor([-3, 0, 7], dtype=torch.int8).sign().tolist() == [-1, 0, 1]
    v = torch.tensor([1.0, 2.0, 3.0, 4.0])
    assert v.std().item() == pytest.approx(math.sqrt(5 / 3))
    assert v.std(unbiased=False).item() == pytest.approx(math.sqrt(1.25))
    assert v.sub(1.0).tolist() == [0.0, 1.0, 2.0, 3.0] and v.sub(v, alpha=2).tolist() == [-1.0, -2.0, -3.0, -4.0]
    w = torch.tensor([1.0, -9.0, 9.0])
    assert w.div_(2.0) is w and w.tolist() == [0.5, -4.5, 4.5]
    assert w.clamp_(-1.0, 1.0).tolist() == [0.5, -1.0, 1.0] and w.tolist() == [0.5, -1.0, 1.0]
    assert w.mul_(4).clamp_max_(3.0).tolist() == [2.0, -4.0, 3.0]
    i = torch.tensor([1, 2], dtype=torch.int32)
    with pytest.raises(RuntimeError, match="can't be cast"):
        i.mul_(0.5)


def test_unique_sorts_and_counts() -> None:
    x = torch.tensor([[3, 1], [3, 7]], dtype=torch.int32)
    assert torch.unique(x).tolist() == [1, 3, 7] and torch.unique(x).dtype is torch.int32
    values, inverse, counts = torch.unique(x, return_inverse=True, return_counts=True)
    assert values.tolist() == [1, 3, 7]
    assert inverse.tolist() == [[1, 0], [1, 2]] and counts.tolist() == [1, 2, 1]
    assert torch.unique(torch.tensor([2.0, -1.0, 2.0]), sorted=True).tolist() == [-1.0, 2.0]


def test_einsum_contracts_in_the_promoted_dtype() -> None:
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((2, 3, 4)).astype(np.float32), rng.standard_normal((5, 4)).astype(np.float32)
    got = torch.einsum("thd,cd->thc", torch.from_numpy(a), torch.from_numpy(b))
    np.testing.assert_allclose(got.numpy(), np.tensordot(a, b, axes=([2], [1])), rtol=1e-6)
    assert got.dtype is torch.float32
    q = torch.full((1, 2, 16), 100, dtype=torch.int8)
    k = torch.ones((3, 16), dtype=torch.int8)
    s = torch.einsum("thd,cd->thc", [q, k])
    assert s.dtype is torch.int8 and s.tolist()[0][0][0] == (1600 + 128) % 256 - 128  # wraps as torch's int8 sum
    h = torch.tensor([[0.1, 0.2]], dtype=torch.bfloat16)
    assert torch.einsum("ij,ij->i", h, h).dtype is torch.bfloat16


def test_golden_report_helpers() -> None:
    """What pypto-lib's golden/validation.py reports with: count_nonzero, movedim, norm, unravel_index,
    quantile, nn.functional.cosine_similarity (values worked by hand)."""
    x = torch.tensor([[0.0, 3.0], [4.0, 0.0]])
    assert x.count_nonzero().item() == 2 and torch.count_nonzero(x, dim=0).tolist() == [1, 1]
    assert x.norm().item() == 5.0
    assert torch.zeros(2, 3, 4).movedim(0, -1).shape == (3, 4, 2)
    assert [int(c.item()) for c in torch.unravel_index(torch.tensor(5), (2, 3))] == [1, 2]
    q = torch.quantile(torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0]), torch.tensor([0.5, 0.9]))
    assert q.tolist() == pytest.approx([3.0, 4.6])
    cos = torch.nn.functional.cosine_similarity(torch.tensor([1.0, 0.0]), torch.tensor([1.0, 1.0]), dim=0)
    assert cos.item() == pytest.approx(math.sqrt(0.5))


def test_half_matmul_accumulates_in_float32_and_rounds_once() -> None:
    """BF16 @ BF16 as torch's CPU kernel: float32 sums rounded once to BF16 (numpy has no BLAS for
    ml_dtypes' bfloat16: an element loop that took minutes on pypto-lib's goldens)."""
    rng = np.random.default_rng(3)
    a, b = (rng.standard_normal(s).astype(ml_dtypes.bfloat16) for s in ((4, 64), (64, 3)))
    got = torch.from_numpy(a) @ torch.from_numpy(b)
    want = (a.astype(np.float32) @ b.astype(np.float32)).astype(ml_dtypes.bfloat16)
    assert got.dtype is torch.bfloat16
    np.testing.assert_array_equal(got.numpy(), want)


def test_log1p_is_accurate_near_zero() -> None:
    x = torch.tensor([1e-10, 0.0, 1.0])
    np.testing.assert_allclose(torch.log1p(x).numpy(), [1e-10, 0.0, math.log(2.0)], rtol=1e-6)
    assert torch.tensor([1, 3]).log1p().dtype is torch.float32


@pytest.mark.parametrize("n_edges", [7, 40])  # a quantisation grid's few edges (counted) and many (searched)
@pytest.mark.parametrize("right", [False, True])
def test_bucketize_agrees_with_a_binary_search_on_ties_and_nan(n_edges: int, right: bool) -> None:
    edges = np.linspace(-3.0, 3.0, n_edges, dtype=np.float32)
    x = np.concatenate([edges, np.random.default_rng(5).normal(0, 2, 498 - n_edges).astype(np.float32), [np.nan, -np.inf]])
    got = torch.bucketize(torch.tensor(x.reshape(2, -1)), torch.tensor(edges), right=right)
    want = np.searchsorted(edges, x, side="right" if right else "left").reshape(2, -1)
    np.testing.assert_array_equal(got.numpy(), want)
    assert got.dtype is torch.int64


def test_randn_and_rand_draw_float32_reproducibly_and_float64_when_asked() -> None:
    torch.manual_seed(9)
    first = torch.randn(3, 1000), torch.rand(5)
    torch.manual_seed(9)
    again = torch.randn(3, 1000), torch.rand(5)
    for a, b in zip(first, again, strict=True):
        assert a.dtype is torch.float32
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert abs(float(first[0].mean())) < 0.1 and 0.9 < float(first[0].std()) < 1.1
    assert torch.randn(4, dtype=torch.float64).dtype is torch.float64
    assert torch.randn(4, dtype=torch.bfloat16).dtype is torch.bfloat16


# -- names pypto's tests/st/runtime goldens call (argmin, bmm, div, eye, mul, eq, uint16 / uint32, ...) ------------


def test_argmin_is_the_first_smallest_index_as_int64() -> None:
    x = torch.tensor([[3.0, 1.0, 1.0], [0.0, 5.0, -2.0]])
    assert torch.argmin(x).dtype is torch.int64 and torch.argmin(x).item() == 5
    assert torch.argmin(x, dim=1).tolist() == [1, 2]
    assert torch.argmin(x, dim=0, keepdim=True).tolist() == [[1, 0, 1]]
    assert x.argmin(-1).shape == (2,)
    assert torch.argmin(torch.tensor([2.0, math.nan, 1.0])).item() == 1  # a NaN counts as smallest
    assert torch.argmin(x, keepdim=True).shape == (1, 1)


def test_bmm_and_mm_are_unbroadcast_products_of_one_dtype() -> None:
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, 3, 4)).astype(np.float32), rng.standard_normal((2, 4, 5)).astype(np.float32)
    out = torch.bmm(torch.from_numpy(a), torch.from_numpy(b))
    assert out.dtype is torch.float32
    np.testing.assert_allclose(out.numpy(), np.einsum("bij,bjk->bik", a, b), rtol=1e-5)
    np.testing.assert_allclose(torch.mm(torch.from_numpy(a[0]), torch.from_numpy(b[0])).numpy(), a[0] @ b[0],
                               rtol=1e-5)
    with pytest.raises(RuntimeError, match="3D"):
        torch.bmm(torch.from_numpy(a[0]), torch.from_numpy(b[0]))
    with pytest.raises(RuntimeError, match="batch2"):
        torch.bmm(torch.from_numpy(a), torch.from_numpy(b[:1]))
    with pytest.raises(RuntimeError, match="same dtype"):
        torch.mm(torch.from_numpy(a[0]), torch.from_numpy(b[0]).half())
    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        torch.mm(torch.from_numpy(a[0]), torch.from_numpy(a[0]))
    h = torch.tensor([[[0.1, 0.2], [0.3, 0.4]]], dtype=torch.bfloat16)
    want = np.matmul(h.numpy().astype(np.float32), h.numpy().astype(np.float32)).astype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(torch.bmm(h, h).numpy(), want)


def test_div_true_trunc_and_floor() -> None:
    a = torch.tensor([7, -7, 7, -7], dtype=torch.int32)
    b = torch.tensor([2, 2, -2, -2], dtype=torch.int32)
    true = torch.div(a, b)
    assert true.dtype is torch.float32 and true.tolist() == [3.5, -3.5, -3.5, 3.5]
    trunc = torch.div(a, b, rounding_mode="trunc")
    assert trunc.dtype is torch.int32 and trunc.tolist() == [3, -3, -3, 3]
    floor = torch.div(a, b, rounding_mode="floor")
    assert floor.dtype is torch.int32 and floor.tolist() == [3, -4, -4, 3]
    assert torch.div(a, 2, rounding_mode="trunc").dtype is torch.int32
    f = torch.tensor([7.5, -7.5])
    assert torch.div(f, 2.0, rounding_mode="trunc").tolist() == [3.0, -3.0]
    assert torch.div(f, 2.0, rounding_mode="floor").tolist() == [3.0, -4.0]
    assert a.div(b, rounding_mode="floor").tolist() == [3, -4, -4, 3]
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        torch.div(a, 0, rounding_mode="trunc")
    with pytest.raises(RuntimeError, match="rounding_mode"):
        torch.div(a, b, rounding_mode="round")
    # A BF16 quotient is truncated in float32, then rounded to BF16 once; a Python number takes the tensor's
    # dtype first (1.0001 is 1.0 in BF16).
    h = torch.tensor([255.0, 3.0], dtype=torch.bfloat16)
    d = torch.tensor([1.0078125, 1.0078125], dtype=torch.bfloat16)
    want = np.trunc(h.numpy().astype(np.float32) / np.float32(1.0078125)).astype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(torch.div(h, d, rounding_mode="trunc").numpy(), want)
    assert torch.div(h, 1.0001, rounding_mode="trunc").tolist() == [255.0, 3.0]
    x = torch.tensor([4.0, 6.0])
    x.div_(torch.tensor([3.0, 4.0]), rounding_mode="floor")
    assert x.tolist() == [1.0, 1.0]


def test_eye_mul_sub_pow_and_comparison_functions() -> None:
    e = torch.eye(3, dtype=torch.float16)
    assert e.dtype is torch.float16
    np.testing.assert_array_equal(e.numpy(), np.eye(3, dtype=np.float16))
    assert torch.eye(2, 3).dtype is torch.float32 and torch.eye(2, 3).shape == (2, 3)
    i = torch.tensor([1, 2, 3], dtype=torch.int32)
    assert torch.mul(i, 2.5).dtype is torch.float32 and torch.mul(i, 2.5).tolist() == [2.5, 5.0, 7.5]
    assert torch.mul(i, i).dtype is torch.int32
    assert torch.sub(i, 1, alpha=2).tolist() == [-1, 0, 1]
    assert torch.pow(2.0, torch.tensor([1.0, 3.0], dtype=torch.float64)).tolist() == [2.0, 8.0]
    assert torch.pow(i, 2).tolist() == [1, 4, 9]
    cases = {torch.eq: [False, True, False], torch.ne: [True, False, True], torch.lt: [True, False, False],
             torch.le: [True, True, False], torch.gt: [False, False, True], torch.ge: [False, True, True]}
    for fn, want in cases.items():
        out = fn(i, 2)
        assert out.dtype is torch.bool and out.tolist() == want


def test_uint16_and_uint32_promote_only_with_floats() -> None:
    u = torch.tensor([0x8007, 1], dtype=torch.uint16)
    assert u.numpy().dtype == np.uint16 and repr(torch.uint32) == "torch.uint32"
    assert torch.zeros(2, dtype=torch.uint32).numpy().dtype == np.uint32
    assert torch.promote_types(torch.uint16, torch.float16) is torch.float16
    assert torch.promote_types(torch.float32, torch.uint32) is torch.float32
    with pytest.raises(RuntimeError, match="uint16, uint32, uint64"):
        torch.promote_types(torch.uint16, torch.int32)
    assert (u + 1).dtype is torch.uint16 and (u + 1).tolist() == [0x8008, 2]
    assert torch.iinfo(torch.uint32).max == 2**32 - 1


def test_fmod_takes_the_dividend_sign_and_reciprocal_erf_relu() -> None:
    assert torch.fmod(torch.tensor([-7, 7]), 3).tolist() == [-1, 1]
    assert torch.tensor([-7.5, 7.5]).fmod(-2.0).tolist() == [-1.5, 1.5]
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        torch.fmod(torch.tensor([1]), 0)
    r = torch.reciprocal(torch.tensor([2, 4], dtype=torch.int32))
    assert r.dtype is torch.float32 and r.tolist() == [0.5, 0.25]
    z = torch.tensor([-1.0, 0.0, 0.5], dtype=torch.float64)
    np.testing.assert_allclose(torch.erf(z).numpy(), [math.erf(-1.0), 0.0, math.erf(0.5)], rtol=1e-15)
    assert torch.relu(torch.tensor([-2, 3], dtype=torch.int32)).tolist() == [0, 3]
    assert torch.relu(torch.tensor([-2.0, math.nan])).isnan().tolist() == [False, True]
    x = torch.tensor([-1.0, 2.0])
    out = torch.nn.functional.silu(x)
    np.testing.assert_allclose(out.numpy(), [-1.0 / (1 + math.e), 2.0 / (1 + math.exp(-2.0))], rtol=1e-6)
    assert torch.nn.functional.relu(x).tolist() == [0.0, 2.0]


def test_bitwise_not_triu_tril() -> None:
    assert torch.bitwise_not(torch.tensor([0x8007], dtype=torch.uint16)).tolist() == [0x7FF8]
    assert torch.bitwise_not(torch.tensor([True, False])).tolist() == [False, True]
    with pytest.raises(RuntimeError, match="bitwise_not"):
        torch.bitwise_not(torch.tensor([1.0]))
    m = torch.ones(3, 4)
    np.testing.assert_array_equal(torch.triu(m, diagonal=1).numpy(), np.triu(np.ones((3, 4)), 1))
    np.testing.assert_array_equal(torch.tril(m, diagonal=-1).numpy(), np.tril(np.ones((3, 4)), -1))
    assert torch.triu(torch.ones(2, 2, dtype=torch.bool)).tolist() == [[True, True], [False, True]]


def test_cummin_takes_the_later_index_on_ties_and_keeps_a_nan() -> None:
    values, indices = torch.cummin(torch.tensor([3.0, 1.0, 2.0, 1.0, math.nan, 0.0]), dim=0)
    assert values.tolist()[:4] == [3.0, 1.0, 1.0, 1.0] and math.isnan(values.tolist()[5])
    assert indices.tolist() == [0, 1, 1, 3, 4, 4]
    v2, i2 = torch.tensor([[5, 4], [1, 9]]).cummax(dim=1)
    assert v2.tolist() == [[5, 5], [1, 9]] and i2.tolist() == [[0, 0], [0, 1]]


def test_linspace_bincount_isin() -> None:
    lin = torch.linspace(-1.0, 1.0, 5)
    assert lin.dtype is torch.float32 and lin.tolist() == [-1.0, -0.5, 0.0, 0.5, 1.0]
    np.testing.assert_allclose(torch.linspace(0, 1, 7).numpy(), np.linspace(0, 1, 7), rtol=1e-6)
    assert torch.linspace(0, 1, 7).tolist()[-1] == 1.0
    counts = torch.bincount(torch.tensor([0, 2, 2, 5]), minlength=7)
    assert counts.dtype is torch.int64 and counts.tolist() == [1, 0, 2, 0, 0, 1, 0]
    w = torch.bincount(torch.tensor([1, 1]), weights=torch.tensor([0.5, 0.25]))
    assert w.dtype is torch.float32 and w.tolist() == [0.0, 0.75]
    assert torch.bincount(torch.tensor([0]), weights=torch.tensor([2])).dtype is torch.float64
    with pytest.raises(RuntimeError, match="non-negative"):
        torch.bincount(torch.tensor([-1, 0]))
    assert torch.isin(torch.tensor([1, 2, 3]), torch.tensor([3, 1])).tolist() == [True, False, True]
    assert torch.isin(torch.tensor([1, 2]), torch.tensor([2]), invert=True).tolist() == [True, False]
