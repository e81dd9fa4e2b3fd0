"""The op kind the attention family serves, typed (Family.details)."""

from typing import NotRequired, TypedDict


class Attention(TypedDict):
    """softmax(q @ k^T * scale, dim=-1) @ v of the first three inputs as passed, q (..., L, E), k (..., S, E),
    v (..., S, Ev) with equal leading dims; output (..., L, Ev) in q's dtype. scale None: 1/sqrt(E), read from q at
    run time; scale_attr: the attribute holding a given scale. causal: torch's is_causal, aligned top-left (query i
    sees keys j <= i, for any L and S). bias: a float mask the module holds, added to the scores (its attribute
    path; read through its strides at run time). k_t: k was given transposed, (..., E, S). F.scaled_dot_product_attention
    or the same written by hand (analyze_attention.py)."""

    causal: bool
    scale: float | None
    scale_attr: str | None
    bias: NotRequired[str]
    k_t: NotRequired[bool]


DETAILS = {"attention": Attention}
