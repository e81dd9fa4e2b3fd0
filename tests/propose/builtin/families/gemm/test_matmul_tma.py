"""The matmul's TMA path under its fp32 moves: every layout on a Hopper GPU (transposed A copied once into (M, K)
rows, batches through 3-D descriptors with a 2-D operand shared, rows not 16-byte aligned copied into padded rows,
C of any row length stored through masked pointers). The path runs only on a Hopper GPU (kc_tma_gpu); here the
test makes the loaded candidate's kc_tma_gpu say yes, so the TMA kernels and helpers run in the interpreter on CPU
tensors, at odd shapes against torch. The `gpu` tests run the first move as rendered on CUDA for the four shape
classes of KernelBench level 1's 16_, 3_, 6_ and 8_ at small odd sizes."""

import pytest
import torch

from kernelcraft.propose.builtin.plan import Op
from tests.propose.builtin.families.gemm.test_matmul import mm_reference
from tests.propose.builtin.kernel_check import DEVICE, Launches, ident, load, moves, reference, render

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

KERNELS = ("kc_matmul_kernel", "kc_matmul_tma_kernel", "kc_tma_rows_kernel", "kc_split_k_sum_kernel",
           "kc_gemv_kernel")
# the TMA moves with the first move's short-K path set aside: these products have K <= SHORT_K (that path:
# test_matmul_short_k.py)
TMA_MOVES = [m.params.but(short_k=False) for m in moves(Op("matmul", {"trans_a": False, "trans_b": False}))
             if m.params.tma]
# (A shape, B shape) as op(A) @ op(B) reads them (transposed operands are made from these); none splits K or is
# a matrix-vector product (those take their own kernels)
CASES = [((37, 19), (19, 45)),  # K = 19: rows of A and of B.T not 16-byte aligned, copied padded
         ((33, 20), (20, 17)),  # N = 17: C's rows unaligned (masked stores), B.T copied as is
         ((130, 24), (24, 260)),  # more than one tile each way, aligned: no copy of A
         ((3, 9, 7), (3, 7, 10)),  # batch 3
         ((1, 9, 8), (1, 8, 10)),  # batch 1
         ((9, 7), (3, 7, 10)),  # A shared by a batch of B
         ((3, 9, 12), (1, 12, 10))]  # B of batch 1 broadcast


def on_hopper(module) -> None:
    """The loaded candidate takes its TMA path as on a Hopper GPU (its kernels still run where the tensors are)."""
    module.kc_tma_gpu = lambda t: True


def run(params, ta, tb, sa, sb, tmp_path, op=None, ref=None, hopper=True, rtol=1e-4, atol=1e-4):
    """ModelNew against Model on op(A) of shape sa, op(B) of shape sb (the inputs transposed as the op reads them);
    returns the kernels it launched. TF32 moves round their inputs on a GPU (exact in the interpreter): 2e-2."""
    if params.precision == "tf32":
        rtol, atol = max(rtol, 2e-2), max(atol, 2e-2)
    op = op or Op("matmul", {"trans_a": ta, "trans_b": tb})
    module = load(render(op, ref or mm_reference(ta, tb), params), tmp_path)
    if hopper:
        on_hopper(module)
    spy = Launches(*(k for k in KERNELS if hasattr(module, k)))
    spy(module)
    torch.manual_seed(0)
    a, b = torch.randn(sa, device=DEVICE), torch.randn(sb, device=DEVICE)
    a, b = (a.transpose(-2, -1).contiguous() if ta else a), (b.transpose(-2, -1).contiguous() if tb else b)
    got, want = module.ModelNew()(a, b), module.Model()(a, b)
    assert got.shape == want.shape
    torch.testing.assert_close(got, want, rtol=rtol, atol=atol, msg=lambda m: f"{params} {sa}@{sb} {ta} {tb}: {m}")
    return spy.seen


@pytest.mark.parametrize("params", TMA_MOVES, ids=ident)
@pytest.mark.parametrize("ta, tb", [(False, False), (True, False), (False, True), (True, True)])
def test_every_layout_takes_tma(params, ta, tb, tmp_path):
    for sa, sb in CASES:
        seen = run(params, ta, tb, sa, sb, tmp_path)
        assert "kc_matmul_tma_kernel" in seen and "kc_matmul_kernel" not in seen, (sa, sb, seen)
        # A as (M, K) rows, B as (N, K) rows (K-major moves) or (K, N): copied, by the rows kernel, exactly where the
        # view is transposed or its rows are not 16 bytes apart
        k_major = tb or params.b_kmajor
        copied = ta or sa[-1] % 4 != 0 or (k_major and not tb) or (not k_major and sb[-1] % 4 != 0)
        assert ("kc_tma_rows_kernel" in seen) == copied, (sa, sb, ta, tb, seen)


def test_a_matmul_with_steps_and_a_triangle_through_tma(tmp_path):
    """A batched, transposed product's epilogue (steps, then the triangle) on the TMA kernel's tiles."""
    op = Op("matmul", {"trans_a": True, "trans_b": False, "steps": [["relu"]],
                       "mask": {"op": "triu", "diagonal": 1}})
    ref = mm_reference(True, False).replace("return torch.matmul(a.transpose(-2, -1), b)",
                                            "return torch.triu(torch.relu(torch.matmul(a.transpose(-2, -1), b)), 1)")
    for sa, sb in ((9, 7), (3, 7, 10)), ((3, 130, 6), (3, 6, 131)):
        seen = run(TMA_MOVES[1], True, False, sa, sb, tmp_path, op=op, ref=ref)
        assert "kc_matmul_tma_kernel" in seen


@pytest.mark.parametrize("params", TMA_MOVES[:1], ids=ident)
def test_split_k_and_matrix_vector_keep_their_kernels(params, tmp_path):
    # the first move runs split-K's parts on the TMA kernel (split_k_tma); without it, exact parts on the strided one
    split = run(params, False, False, (40, 1536), (1536, 24), tmp_path)
    assert params.split_k_tma and split[-2:] == ["kc_matmul_tma_kernel", "kc_split_k_sum_kernel"], split
    strided = params.but(split_k_tma=False)
    assert run(strided, False, False, (40, 1536), (1536, 24), tmp_path) == ["kc_matmul_kernel", "kc_split_k_sum_kernel"]
    assert run(params, True, False, (40, 37), (37, 3), tmp_path) == ["kc_gemv_kernel"]


def test_off_hopper_the_strided_kernel(tmp_path):
    if DEVICE == "cuda" and torch.cuda.get_device_capability()[0] >= 9:
        pytest.skip("a Hopper GPU takes TMA")
    for params in TMA_MOVES:
        assert run(params, True, False, (33, 20), (20, 17), tmp_path, hopper=False) == ["kc_matmul_kernel"]


VIEWS = {  # a view -> (how kc_tma_rows returns it: "same", or "kernel": the rows kernel's copy, padded where needed)
    "aligned": (lambda: torch.randn(70, 92)[4:, 8:], "same"),  # rows of 368 bytes, base 1504 bytes in
    "transposed": (lambda: torch.randn(68, 88).mT, "kernel"),  # rows of 68 floats
    "offset": (lambda: torch.randn(70, 92)[:, 1:89], "kernel"),  # base 4 bytes in, rows of 88 floats
    "padded": (lambda: torch.randn(70, 87), "kernel"),
    "transposed_padded": (lambda: torch.randn(67, 70).mT, "kernel"),
    "batched": (lambda: torch.randn(3, 61, 65).mT, "kernel"),
    "offset_padded": (lambda: torch.randn(70, 92)[:, 1:], "kernel")}


@pytest.mark.parametrize("view", VIEWS)
def test_rows_helper(view, tmp_path):
    """kc_tma_rows: a view TMA reads as it lies comes back as it is; any other one the rows kernel's copy equal to it,
    its rows and base 16-byte aligned (padded where its rows are not 16 bytes long)."""
    module = load(render(Op("matmul", {"trans_a": False, "trans_b": False}), mm_reference(False, False),
                         TMA_MOVES[0]), tmp_path)
    spy = Launches("kc_tma_rows_kernel")
    spy(module)
    make, how = VIEWS[view]
    torch.manual_seed(0)
    with torch.device(DEVICE):  # made where it is used: a view moved by .to() comes back contiguous
        t = make()
    got = module.kc_tma_rows(t)
    assert torch.equal(got, t) and module.kc_tma_reads(got)
    assert got.stride(-1) == 1 and got.data_ptr() % 16 == 0 and all(s * 4 % 16 == 0 for s in got.stride()[:-1])
    assert (got.data_ptr() == t.data_ptr()) == (how == "same")
    if how == "kernel":  # unpadded where its rows are 16 bytes long
        assert got.is_contiguous() == (t.shape[-1] % 4 == 0)
    assert (spy.seen == ["kc_tma_rows_kernel"]) == (how == "kernel")


@pytest.mark.parametrize("params", [m.params for m in moves(Op("matmul", {"trans_a": False, "trans_b": False,
                                                                          "dtype": "float16"})) if m.params.tma],
                         ids=ident)
def test_half_moves_take_tma_for_2d_operands_as_they_lie(params, tmp_path):
    """A 16-bit move copies nothing: 2-D operands TMA reads as they lie take its TMA kernel, others the strided one."""
    op = Op("matmul", {"trans_a": False, "trans_b": False, "dtype": "float16"})
    module = load(render(op, mm_reference(False, False), params), tmp_path)
    on_hopper(module)
    for sa, sb, tma in (((40, 24), (24, 136), True), ((40, 20), (20, 136), False), ((2, 40, 24), (2, 24, 136), False)):
        spy = Launches(*(k for k in KERNELS if hasattr(module, k)))
        spy(module)
        torch.manual_seed(0)
        a, b = torch.randn(sa, device=DEVICE).half(), torch.randn(sb, device=DEVICE).half()
        torch.testing.assert_close(module.ModelNew()(a, b), module.Model()(a, b), rtol=2e-2, atol=2e-2)
        assert spy.seen == ["kc_matmul_tma_kernel" if tma else "kc_matmul_kernel"], (sa, sb, spy.seen)
        for name in spy.names:  # unwrap for the next case
            setattr(module, name, getattr(module, name).kernel)


# the four shape classes of KernelBench level 1's 16_ (A.T), 3_ (bmm), 6_ (long K: split-K) and 8_ (rows not
# 16-byte aligned), small and odd: (trans_a, A shape as given, B shape, the kernel that must run on a Hopper GPU)
GPU_CASES = {"transposed_a": (True, (515, 263), (515, 390), "kc_matmul_tma_kernel"),
             "bmm": (False, (3, 129, 515), (3, 515, 262), "kc_matmul_tma_kernel"),
             "large_k": (False, (200, 16384), (16384, 136), "kc_split_k_sum_kernel"),
             "irregular": (False, (301, 263), (263, 257), "kc_matmul_tma_kernel")}


@pytest.mark.gpu
@pytest.mark.parametrize("case", GPU_CASES)
def test_gpu_first_move(case, tmp_path):
    """The first move as rendered, on CUDA: the kernel each class must take on a Hopper GPU, fp32-accurate."""
    ta, sa, sb, kernel = GPU_CASES[case]
    op = Op("matmul", {"trans_a": ta, "trans_b": False})
    module = load(render(op, mm_reference(ta, False), moves(op)[0].params), tmp_path)
    spy = Launches(*(k for k in KERNELS if hasattr(module, k)))
    spy(module)
    torch.manual_seed(0)
    a, b = torch.randn(sa, device="cuda"), torch.randn(sb, device="cuda")
    got = module.ModelNew()(a, b)
    want = module.Model()(a.double(), b.double())
    # fp32 sums over K = 16384 carry ~1e-3 of absolute error: the bound is relative to the largest magnitude
    torch.testing.assert_close(got.double(), want, rtol=1e-4, atol=1e-4 * want.abs().max().item())
    if torch.cuda.get_device_capability()[0] >= 9:
        assert kernel in spy.seen, spy.seen


@pytest.mark.parametrize("params", [m.params for m in moves(Op("linear", {"weight": "fc.weight", "bias": "fc.bias",
                                                                          "steps": [["relu"]]})) if m.params.tma],
                         ids=ident)
def test_linear_tma_kernel(params, tmp_path):
    """A linear's TMA path (2-D operands with aligned rows, never batched) in the interpreter: its kernel, the
    matmul's with batch 1, against torch; rows not 16-byte aligned take the strided kernel."""
    op = Op("linear", {"weight": "fc.weight", "bias": "fc.bias", "steps": [["relu"]]})
    ref = reference("torch.relu(self.fc(x))", "self, k, n", "self.fc = nn.Linear(k, n)")
    module = load(render(op, ref, params), tmp_path)
    on_hopper(module)
    for (k, n), shape, tma in (((24, 136), (2, 70, 24), True), ((19, 136), (40, 19), False)):
        spy = Launches("kc_linear_kernel", "kc_linear_tma_kernel")
        spy(module)
        torch.manual_seed(0)
        model = module.Model(k, n).to(DEVICE)
        new = module.ModelNew(k, n).to(DEVICE)
        new.load_state_dict(model.state_dict())
        x = torch.randn(shape, device=DEVICE)
        with torch.no_grad():
            tol = 2e-2 if params.precision == "tf32" else 1e-4  # TF32 rounds its inputs on a GPU
            torch.testing.assert_close(new(x), model(x), rtol=tol, atol=tol)
        assert spy.seen == ["kc_linear_tma_kernel" if tma else "kc_linear_kernel"]
        for name in spy.names:
            setattr(module, name, getattr(module, name).kernel)


def test_rows_helper_with_a_dim_of_size_one(tmp_path):
    """A (1, K) view of a (K, 1) tensor is contiguous to torch while its row stride stays 1 (4 bytes): TMA could not
    take a descriptor of it, so the helper copies it into rows it can read (a GPU refused the stride as it was)."""
    module = load(render(Op("matmul", {"trans_a": False, "trans_b": False}), mm_reference(False, False),
                         TMA_MOVES[0]), tmp_path)
    t = torch.randn(40, 1, device=DEVICE).mT  # (1, 40), strides (1, 1)
    assert t.is_contiguous() and not module.kc_tma_reads(t)
    got = module.kc_tma_rows(t)
    assert torch.equal(got, t) and module.kc_tma_reads(got)
