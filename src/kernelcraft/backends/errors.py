"""Errors a backend raises while turning a candidate's source into something callable."""


class CompileError(Exception):
    """The candidate's code did not compile; `log` is the compiler's message, trimmed for a reader."""

    def __init__(self, log: str):
        super().__init__(log)
        self.log = log
