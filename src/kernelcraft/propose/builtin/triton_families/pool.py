"""Pooling family (max, avg, adaptive avg; 2-D, and 1-D as H = 1) over a contiguous x seen as [planes, H, W]:
each output walks its window tap by tap, masked loads standing for the padding. Programs take a tile of
outputs, [BLOCK_P planes, BLOCK_H rows, BLOCK_W cols] (overlapping windows of neighbouring outputs meet in
L1/L2), or a flat run of BLOCK outputs that decode their (plane, row, col). Window sizes, strides and padding
are the op's own constants (taps unrolled); adaptive bins are computed per output from the run-time sizes."""

from __future__ import annotations

import inspect
from string import Template

from kernelcraft.propose.builtin.plan import Op


def kc_pool_out(size, axis, pool):
    """Output length along spatial axis `axis` (0: H, 1: W) of an input `size` long, for the pooling `pool` (a
    pool2d Op detail), by torch's rules. Used by the generated forward and by the tests."""
    if pool["pool"] == "adaptive_avg":
        want = pool["output_size"][axis]
        return size if want is None else want
    k, s, p, d = pool["kernel"][axis], pool["stride"][axis], pool["padding"][axis], pool["dilation"][axis]
    n = (size + 2 * p - d * (k - 1) - 1 + (s - 1 if pool["ceil_mode"] else 0)) // s + 1
    if pool["ceil_mode"] and (n - 1) * s >= size + p:
        n -= 1  # with ceil_mode the last window must still start inside the input or its left padding
    return n


def _pool_moves(op: Op) -> list[tuple]:
    tile = ("Output tiles of {h} x {w} in one (n, c) plane per program; the window taps are unrolled, each one "
            "strided tile load, so the input rows that overlapping windows share are served from L1/L2; {nw} warps")
    planes = ("Several planes per program: {p} planes x {h} x {w} outputs, so small output planes (7x7, 14x14) do "
              "not leave most lanes of a one-plane tile idle")
    flat = ("Flat grid over all outputs, {b} per program: each output decodes its (plane, row, col) once and walks "
            "its window; no lane wasted on tile edges; {nw} warps")

    def tilep(p, h, w, nw, **kw):
        return {"variant": "tile", "BLOCK_P": p, "BLOCK_H": h, "BLOCK_W": w, "num_warps": nw, **kw}

    out = [(tile.format(h=8, w=64, nw=4), "memory", tilep(1, 8, 64, 4)),
           (tile.format(h=16, w=32, nw=4), "memory", tilep(1, 16, 32, 4)),
           (flat.format(b=1024, nw=4), "parallelism", {"variant": "flat", "BLOCK": 1024, "num_warps": 4}),
           (planes.format(p=16, h=8, w=8), "parallelism", tilep(16, 8, 8, 4)),
           ("Output tiles of 8 x 64 loading with evict_last, so the input rows shared with the next tile's windows "
            "stay in L2", "memory", tilep(1, 8, 64, 4, evict_last=True)),
           (flat.format(b=256, nw=2), "parallelism", {"variant": "flat", "BLOCK": 256, "num_warps": 2})]
    if op.detail["pool"] == "adaptive_avg":  # few outputs per plane (e.g. 7x7): the plane-packing moves first
        out = [out[3], out[2], out[5], out[0], out[1]]
    return out


_TILE_INDEX = '''    pid = tl.program_id(0)
    tw = pid % n_tw
    th = (pid // n_tw) % n_th
    pg = pid // (n_tw * n_th)
    p = (pg * BLOCK_P + tl.arange(0, BLOCK_P)).to(tl.int64)[:, None, None]
    oh = (th * BLOCK_H + tl.arange(0, BLOCK_H))[None, :, None]
    ow = (tw * BLOCK_W + tl.arange(0, BLOCK_W))[None, None, :]
    valid = (p < P) & (oh < OH) & (ow < OW)'''

_FLAT_INDEX = '''    o = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    valid = o < P * OH * OW
    ow = o % OW
    oh = (o // OW) % OH
    p = o // (OW * OH)'''

_POOL = Template('''
@triton.jit
def kc_pool2d_kernel(x_ptr, y_ptr, P, H, W, OH, OW, n_th, n_tw, KH_MAX, KW_MAX, BLOCK_P: tl.constexpr,
                     BLOCK_H: tl.constexpr, BLOCK_W: tl.constexpr, BLOCK: tl.constexpr):
$index
    plane = x_ptr + p * H * W
$bounds
    acc = tl.full(valid.shape, $init, tl.float32)
    for kh in $loop_h:
        h = hs + kh$dil_h
        hok = valid & (h >= 0) & (h < $h_end)
        for kw in $loop_w:
            w = ws + kw$dil_w
            ok = hok & (w >= 0) & (w < $w_end)
            v = tl.load(plane + h * W + w, mask=ok, other=$init$hint).to(tl.float32)
            acc = $combine
    tl.store(y_ptr + (p * OH + oh) * OW + ow, ($final).to(y_ptr.dtype.element_ty), mask=valid)
''')


def _kernel(op: Op, p: dict) -> str:
    d = op.detail
    if d["pool"] == "adaptive_avg":  # bin i: [floor(i * H / OH), ceil((i + 1) * H / OH))
        bounds = ["hs = (oh * H) // OH", "he = ((oh + 1) * H + OH - 1) // OH",
                  "ws = (ow * W) // OW", "we = ((ow + 1) * W + OW - 1) // OW",
                  "div = ((he - hs) * (we - ws)).to(tl.float32)"]
        sub = {"loop_h": "range(0, KH_MAX)", "loop_w": "range(0, KW_MAX)", "dil_h": "", "dil_w": "",
               "h_end": "he", "w_end": "we", "final": "acc / div"}
    else:
        (kh, kw), (sh, sw), (ph, pw), (dh, dw) = d["kernel"], d["stride"], d["padding"], d["dilation"]
        bounds = [f"hs = oh * {int(sh)} - {int(ph)}", f"ws = ow * {int(sw)} - {int(pw)}"]
        sub = {"loop_h": f"tl.static_range({int(kh)})", "loop_w": f"tl.static_range({int(kw)})",
               "dil_h": f" * {int(dh)}" if dh != 1 else "", "dil_w": f" * {int(dw)}" if dw != 1 else "",
               "h_end": "H", "w_end": "W", "final": "acc"}
        if d["pool"] == "avg":  # torch: the window clipped to the padded input, or to the input itself
            bounds += [f"he = tl.minimum(hs + {int(kh)}, H + {int(ph)})",
                       f"we = tl.minimum(ws + {int(kw)}, W + {int(pw)})"]
            if d["count_include_pad"]:
                bounds.append("div = ((he - hs) * (we - ws)).to(tl.float32)")
            else:
                bounds.append("div = ((tl.minimum(he, H) - tl.maximum(hs, 0)) "
                              "* (tl.minimum(we, W) - tl.maximum(ws, 0))).to(tl.float32)")
            sub["final"] = "acc / div"
    if d["pool"] == "max":  # NaN wins, as in torch (a NaN tap replaces the max and is never replaced by a number)
        sub.update(init='-float("inf")', combine="tl.where((v > acc) | (v != v), v, acc)")
    else:
        sub.update(init="0.0", combine="acc + v")
    index = _TILE_INDEX if p["variant"] == "tile" else _FLAT_INDEX
    hint = ', eviction_policy="evict_last"' if p.get("evict_last") else ""
    return _POOL.substitute(index=index, bounds="\n".join("    " + b for b in bounds), hint=hint, **sub)


def _render_pool(op: Op, p: dict) -> tuple[list[str], str]:
    d = op.detail
    dims = int(d.get("dims", 2))
    helper = inspect.getsource(kc_pool_out) + f"\n\nKC_POOL = {d!r}\n"
    warps = int(p["num_warps"])
    if p["variant"] == "tile":
        launch = f'''bp, bh, bw = {int(p["BLOCK_P"])}, min({int(p["BLOCK_H"])}, np2(OH)), min({int(p["BLOCK_W"])}, np2(OW))
n_th, n_tw = triton.cdiv(OH, bh), triton.cdiv(OW, bw)
grid = (triton.cdiv(P, bp) * n_th * n_tw,)
kc_pool2d_kernel[grid](x, y, P, H, W, OH, OW, n_th, n_tw, kh_max, kw_max, BLOCK_P=bp, BLOCK_H=bh, BLOCK_W=bw,
                       BLOCK=1, num_warps={warps})'''
    else:
        launch = f'''grid = (triton.cdiv(y.numel(), {int(p["BLOCK"])}),)
kc_pool2d_kernel[grid](x, y, P, H, W, OH, OW, 1, 1, kh_max, kw_max, BLOCK_P=1, BLOCK_H=1, BLOCK_W=1,
                       BLOCK={int(p["BLOCK"])}, num_warps={warps})'''
    body = f'''
np2 = triton.next_power_of_2
H, W = ({"x.shape[-2]" if dims == 2 else "1"}), x.shape[-1]
OH, OW = kc_pool_out(H, 0, KC_POOL), kc_pool_out(W, 1, KC_POOL)
lead = x.shape[:-{dims}]
y = torch.empty({"(*lead, OH, OW)" if dims == 2 else "(*lead, OW)"}, dtype=x.dtype, device=x.device)
P = math.prod(lead)
if y.numel() == 0:
    return y
# adaptive bins: at most ceil(size / out) + 1 long, exactly size / out when it divides (unused otherwise)
kh_max = triton.cdiv(H, OH) + (1 if H % OH else 0)
kw_max = triton.cdiv(W, OW) + (1 if W % OW else 0)
{launch}
return y'''
    return [helper, _kernel(op, p)], body


KINDS = {"pool2d": (_pool_moves, _render_pool)}
