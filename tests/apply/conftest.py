"""The regions' kernels (the built-in engineer's) run in Triton's interpreter when there is no GPU: the same set-up
as the engineer's own tests."""

from tests.propose.builtin.conftest import DEVICE, exact_reference, interpreted_stdlib  # noqa: F401
