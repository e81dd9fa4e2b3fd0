"""The errors kernelcraft raises on bad input, under one base. Each is a ValueError whose message is one
line saying what was wrong and what to pass instead; the CLI prints it, the Python API raises it."""


class KernelcraftError(ValueError):
    """Bad input to kernelcraft: a problem, candidate, setting, run or store it cannot use."""


class ConfigError(KernelcraftError):
    """A setting that cannot work (a model, endpoint, price, strategy, backend or budget); the message says
    what to pass."""


class ProblemError(KernelcraftError):
    """A problem file that cannot be used: unreadable, not Python, or missing the KernelBench names."""
