"""The errors kernelcraft raises, on the floor every other module stands on, so that a face catches them without
reaching into the floors that raise them.

Bad input is a KernelcraftError (a ValueError) whose message is one line saying what was wrong and what to pass
instead; the CLI prints it, the Python API raises it. The rest are not the user's mistake: a run or an apply
stopped by Ctrl-C or SIGTERM (named for --resume), the harness's files changed under the verifier, a profile that
could not be had."""


class KernelcraftError(ValueError):
    """Bad input to kernelcraft: a problem, candidate, setting, run or store it cannot use."""


class ConfigError(KernelcraftError):
    """A setting that cannot work (a model, endpoint, price, strategy, backend or budget); the message says
    what to pass."""


class ProblemError(KernelcraftError):
    """A problem file that cannot be used: unreadable, not Python, or missing the KernelBench names."""


class CandidateError(KernelcraftError):
    """A candidate file that cannot be evaluated at all (missing, binary, huge, no ModelNew)."""


class RunInterrupted(KeyboardInterrupt):
    """A run stopped by Ctrl-C or SIGTERM: stored as `stopped` (`interrupted`); `run_id` names it for --resume."""

    def __init__(self, run_id: str):
        super().__init__(run_id)
        self.run_id = run_id


class ApplyInterrupted(KeyboardInterrupt):
    """An apply stopped by Ctrl-C or SIGTERM: stored as `stopped`; `apply_id` names it for --resume."""

    def __init__(self, apply_id: str):
        super().__init__(apply_id)
        self.apply_id = apply_id


class HarnessTampered(RuntimeError):
    """The harness's files changed while the verifier ran: nothing it judges from then on can be trusted."""


# Why a profile could not be had. The first three are the machine's, not the kernel's: a run that meets
# one stops asking for profiles.
PROFILE_REASONS = ("ncu_missing", "no_gpu", "counters_not_permitted", "timeout", "target_failed", "no_kernels",
                   "ncu_failed")
PROFILE_ENVIRONMENT = ("ncu_missing", "no_gpu", "counters_not_permitted")


class ProfileError(Exception):
    """A profile that could not be had, with its reason (one of PROFILE_REASONS) and one line saying why."""

    def __init__(self, reason: str, message: str):
        assert reason in PROFILE_REASONS, reason
        super().__init__(message)
        self.reason = reason
