"""Problems: KernelBench-format PyTorch references, from a file, a directory or the built-in suite."""

from kernelcraft.problems.problem import (Problem, ProblemError, load_problem, load_problem_dir,
                                          load_suite, read_source, suite_names)

__all__ = ["Problem", "ProblemError", "load_problem", "load_problem_dir", "load_suite", "read_source",
           "suite_names"]
