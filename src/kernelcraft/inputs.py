"""What the Python API (and the CLI) is handed as a problem or a candidate: a path, a suite name
(`level1/softmax`), `example:NAME` (a bundled candidate), source text, or the object itself."""

from __future__ import annotations

from pathlib import Path

from kernelcraft.candidate import Candidate, CandidateError
from kernelcraft.problems import Problem, ProblemError, load_problem, load_problem_dir, load_suite
from kernelcraft.problems.problem import MAX_SOURCE_BYTES


def is_source(spec: object, class_name: str) -> bool:
    """Source text rather than a name: several lines, one of them defining `class_name`."""
    return isinstance(spec, str) and "\n" in spec and f"class {class_name}" in spec


def _check_source(text: str, what: str) -> None:
    """Source text as read_source checks a file: not huge, no NUL bytes, Python that compiles."""
    if len(text.encode()) > MAX_SOURCE_BYTES:
        raise ProblemError(f"{what} source is {len(text.encode())} bytes; sources are limited to {MAX_SOURCE_BYTES}")
    if "\0" in text:
        raise ProblemError(f"{what} source holds NUL bytes; it is not Python source")
    try:
        compile(text, f"<{what}>", "exec")
    except SyntaxError as exc:
        raise ProblemError(f"{what} source:{exc.lineno}: syntax error: {exc.msg}") from None


def as_problem(spec: Problem | str | Path, name: str = "problem") -> Problem:
    """A Problem from a path, a suite name or source text defining `class Model` (named `name`)."""
    if isinstance(spec, Problem):
        return spec
    if isinstance(spec, str) and "\n" in spec:
        if not is_source(spec, "Model"):
            raise ProblemError("problem text has several lines but defines no `class Model`: give a file, "
                               "a suite name such as level1/softmax, or KernelBench-format source")
        _check_source(spec, "problem")
        return Problem(name, Path(f"<{name}>"), spec)
    if not isinstance(spec, (str, Path)):
        raise ProblemError(f"a problem is a path, a suite name or source text, not {type(spec).__name__}")
    return load_problem(spec)


def as_candidate(spec: Candidate | str | Path, backend: str = "", name: str = "candidate") -> Candidate:
    """A Candidate from a path, `example:NAME`, or source text defining `class ModelNew` (named `name`)."""
    if isinstance(spec, Candidate):
        return spec
    if isinstance(spec, str) and "\n" in spec:
        if not is_source(spec, "ModelNew"):
            raise CandidateError("candidate text has several lines but defines no `class ModelNew`: give a file, "
                                 "example:NAME, or source defining ModelNew")
        try:
            _check_source(spec, "candidate")
        except ProblemError as exc:
            raise CandidateError(str(exc)) from None
        return Candidate(spec, name, backend)
    if not isinstance(spec, (str, Path)):
        raise CandidateError(f"a candidate is a path, example:NAME or source text, not {type(spec).__name__}")
    return Candidate.from_file(spec, backend)


def problem_set(spec) -> list[Problem]:
    """Bench's problems: `level1`…, `all`, a directory of problem files, one file or suite name, or a list
    of any of the forms as_problem takes."""
    if isinstance(spec, (list, tuple)):
        return [as_problem(s) for s in spec]
    suite = str(spec)
    if suite == "all":
        return load_suite()
    if suite.startswith("level") and suite[5:].isdigit():
        return load_suite(int(suite[5:]))
    path = Path(suite)
    if path.is_dir():
        return load_problem_dir(path)
    return [as_problem(spec)]
