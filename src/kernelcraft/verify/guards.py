"""Static guards: what a candidate's source may not do, read before any of it runs.

Python is read through its syntax tree (so comments and docstrings don't trip a rule) and the
string constants that hold CUDA or C++ code are read as text. Each rule names the reward-hack class
it closes; a finding becomes a named reason on the result. Static checks are one layer: the dynamic
checks (profiler, clocks, process watch) stand behind them.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from kernelcraft import syntax
from kernelcraft.backends import BACKENDS


@dataclass(frozen=True)
class Finding:
    reason: str
    detail: str


# Modules whose import means work or state outside the call being timed and checked.
_CONCURRENCY = {"threading", "multiprocessing", "subprocess", "concurrent", "asyncio", "_thread", "signal"}
# Ways to reach the harness's or the interpreter's insides.
_INTROSPECTION = {"gc", "inspect", "ctypes", "importlib", "builtins", "sys", "pickle", "marshal", "socket",
                  "urllib", "http", "requests", "shutil", "kernelcraft.verify", "kernelcraft.problems"}
# What of this package a candidate may import: its backends' runtimes (kernelcraft.backends.nvrtc).
_ALLOWED_KERNELCRAFT = frozenset().union(*(b.runtime_modules for b in BACKENDS.values()))
# Attributes that, assigned to, patch timing or synchronisation.
_TIMING_TARGETS = re.compile(r"^(time|torch\.cuda|torch\.cuda\.Event|torch\.cuda\.Stream|torch\.Tensor|"
                             r"torch\.nn\.Module|triton\.testing|torch\.cuda\.streams|torch\.cuda\.events)\.")
_FORBIDDEN_CALLS = {"os.fork": "static_concurrency", "os.system": "static_concurrency",
                    "os.popen": "static_concurrency", "os.spawnv": "static_concurrency",
                    "os.kill": "static_concurrency", "os._exit": "early_exit", "sys.exit": "early_exit",
                    "exit": "early_exit", "quit": "early_exit", "eval": "static_introspection",
                    "exec": "static_introspection", "compile": "static_introspection",
                    "__import__": "static_introspection", "globals": "static_introspection",
                    "setattr": "static_patching", "torch.cuda.Stream": "side_stream",
                    "torch.cuda.stream": "side_stream", "torch.cuda.set_stream": "side_stream",
                    "torch.manual_seed": "seed_prediction", "torch.cuda.manual_seed": "seed_prediction",
                    "torch.initial_seed": "seed_prediction", "random.seed": "seed_prediction",
                    "torch.cuda.set_per_process_memory_fraction": "static_patching",
                    "torch.backends.cuda.matmul.allow_tf32": "precision_downgrade"}
# CUDA / C++ text inside the candidate's strings.
_CUDA_RULES = [
    (re.compile(r"cudaStreamCreate|cuStreamCreate|cudaStreamPerThread|cudaStreamNonBlocking"), "side_stream",
     "creates a CUDA stream of its own"),
    (re.compile(r"accessPolicyWindow|cudaLimitPersistingL2CacheSize|cudaAccessPropertyPersisting|"
                r"cudaStreamSetAttribute"), "persisting_l2", "sets a persisting-L2 access policy"),
    (re.compile(r"std::thread|pthread_create|std::async|\bfork\s*\(|\bpopen\s*\(|\bsystem\s*\("),
     "static_concurrency", "starts threads or processes from C++"),
    (re.compile(r"\bfopen\s*\(|std::ofstream|std::ifstream|/proc/"), "static_introspection",
     "reads or writes files from C++"),
    (re.compile(r"cudaDeviceSynchronize|cudaStreamSynchronize|cudaEventRecord|cudaEventElapsedTime"),
     "static_patching", "calls CUDA timing or synchronisation APIs itself"),
]


def _dotted(node: ast.AST) -> str:
    """`a.b.c` for a name and its attributes; a chain rooted in anything else (a call, a subscript) starts with
    "?": Net().eval() is "?.eval", a module's method, never the builtin eval."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    parts.append(node.id if isinstance(node, ast.Name) else "?")
    return ".".join(reversed(parts))


def _statements(source: str | None) -> set[str]:
    """The top-level statements of the problem's own file, each as its syntax tree's dump (positions left out)."""
    if not source:
        return set()
    try:
        return {ast.dump(stmt) for stmt in syntax.parse(source).body}
    except SyntaxError:
        return set()


def _import_findings(node: ast.Import | ast.ImportFrom) -> list[tuple[str, str]]:
    """(reason, detail) for each module the import brings in that a candidate may not import."""
    names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
    out = []
    for name in names:
        root = name.split(".")[0]
        if root in _CONCURRENCY:
            out.append(("static_concurrency", f"imports {name}"))
        elif name in _ALLOWED_KERNELCRAFT or name.startswith(tuple(_ALLOWED_KERNELCRAFT)):
            continue
        elif root in _INTROSPECTION or name in _INTROSPECTION or root == "kernelcraft" or \
                any(name.startswith(m + ".") for m in _INTROSPECTION):
            out.append(("static_introspection", f"imports {name}"))
    return out


def static_findings(source: str, trusted: str | None = None) -> list[Finding]:
    """Every rule the source breaks (empty for an honest candidate).

    `trusted`: the problem's own file (the reference the verifier runs itself). A top-level statement of the
    source that is one of that file's, unchanged, is the user's code, not the candidate's: it is not read for
    rules (a model file may seed torch, import sys or call setattr, as `apply`'s reassembled model carries it).
    A name such a statement imports from a forbidden module stays forbidden to the rest of the source: using it
    there is the finding its import would be."""
    try:
        tree = syntax.parse(source)
    except SyntaxError as exc:
        return [Finding("syntax_error", f"line {exc.lineno}: {exc.msg}")]
    found: list[Finding] = []

    def add(reason: str, detail: str) -> None:
        if not any(f.reason == reason and f.detail == detail for f in found):
            found.append(Finding(reason, detail))

    theirs = _statements(trusted)
    aliases: dict[str, str] = {}
    held: dict[str, tuple[str, str]] = {}  # a name the trusted statements import from a forbidden module
    ours = []
    for stmt in tree.body:
        if ast.dump(stmt) not in theirs:
            ours.append(stmt)
            continue
        for node in ast.walk(stmt):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for alias in node.names:
                    full = alias.name if isinstance(node, ast.Import) else f"{node.module}.{alias.name}"
                    aliases[alias.asname or alias.name.split(".")[0]] = full
                for reason, detail in _import_findings(node):
                    for alias in node.names:
                        held[alias.asname or alias.name.split(".")[0]] = (reason, detail)
    for node in (n for stmt in ours for n in ast.walk(stmt)):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                full = alias.name if isinstance(node, ast.Import) else f"{node.module}.{alias.name}"
                aliases[alias.asname or alias.name.split(".")[0]] = full
            for reason, detail in _import_findings(node):
                add(reason, detail)
        elif isinstance(node, ast.Name) and node.id in held:
            reason, detail = held[node.id]
            add(reason, f"uses {node.id}, which the problem's file {detail}")
        elif isinstance(node, ast.Call):
            name = _dotted(node.func)
            head, _, rest = name.partition(".")
            resolved = f"{aliases[head]}.{rest}".rstrip(".") if head in aliases else name
            for candidate in (name, resolved):
                if candidate in _FORBIDDEN_CALLS:
                    add(_FORBIDDEN_CALLS[candidate], f"calls {candidate}()")
            if resolved.startswith("open") or name == "open":
                mode = node.args[1] if len(node.args) > 1 else next((k.value for k in node.keywords if k.arg == "mode"), None)
                if isinstance(mode, ast.Constant) and any(c in str(mode.value) for c in "wax+"):
                    add("harness_tampering", "opens a file for writing")
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                name = _dotted(target)
                head, _, rest = name.partition(".")
                resolved = f"{aliases[head]}.{rest}" if head in aliases and rest else name
                if _TIMING_TARGETS.match(resolved + ".") or _TIMING_TARGETS.match(resolved):
                    add("static_patching", f"assigns to {resolved}")
                elif resolved.startswith("torch.backends.") and ("tf32" in resolved or "reduced_precision" in resolved):
                    add("precision_downgrade", f"assigns to {resolved}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and len(node.value) > 40:
            for pattern, reason, detail in _CUDA_RULES:
                if pattern.search(_strip_c_comments(node.value)):
                    add(reason, detail)
    return found


def _strip_c_comments(code: str) -> str:
    return re.sub(r"//[^\n]*|/\*.*?\*/", " ", code, flags=re.S)
