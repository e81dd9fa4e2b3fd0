"""The op kinds the recurrent family serves, typed (Family.details)."""

from typing import Any, Literal, TypedDict


class Recurrent(TypedDict):
    """One result of the nn.LSTM / nn.GRU at attribute path `module` over src, the input sequence ((T, B, F),
    (B, T, F) with batch_first, or unbatched (T, F)); states: the initial states as passed (value refs), [h0, c0]
    for lstm, [h0] for gru, [] for zeros. Everything else is the module's, read at run time (layers, directions,
    batch_first, bias, weights; proj_size refused, dropout only in eval mode); torch's gate order (LSTM i, f, g, o;
    GRU r, z, n). result: the output sequence (the last layer's h_t, directions side by side), h_n or c_n (lstm);
    index: only that entry of the result along its first dim (h_n, c_n: one layer and direction) or, of the
    output, along its time dim. One op per result read, each computing the whole recurrence."""

    module: str
    result: Literal["output", "h_n", "c_n"]
    index: int | None
    states: list[Any]


DETAILS = {"lstm": Recurrent, "gru": Recurrent}
