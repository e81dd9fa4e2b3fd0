"""The op kind the pointwise family serves, typed (Family.details; steps by plan.py's grammar)."""

from typing import TypedDict

from kernelcraft.propose.builtin.plan import Steps


class Elementwise(TypedDict):
    """y = f_n(...f_1(x)), same shape and dtype as x (with tensor steps: the shape broadcast with their operands')."""

    steps: Steps


DETAILS = {"elementwise": Elementwise}
