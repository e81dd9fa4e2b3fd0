"""The verifier: compile candidates, check them against the reference, time them. Nothing else."""

from kernelcraft.result import Result, Timing
from kernelcraft.verify.config import VerifyConfig
from kernelcraft.verify.integrity import HarnessTampered
from kernelcraft.verify.timing import TimingConfig
from kernelcraft.verify.front import Job, JobFront
from kernelcraft.verify.verifier import Verifier, resolve_devices

__all__ = ["HarnessTampered", "Job", "JobFront", "Result", "Timing", "TimingConfig", "Verifier", "VerifyConfig", "resolve_devices"]
