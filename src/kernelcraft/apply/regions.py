"""Cut a captured graph (capture.py's form) into regions: groups of nodes that each become a standalone problem.

- A heavy op (conv, linear, matmul, norm, pooling, softmax, a reduction, attention) starts a region, and takes the
  ops that follow it while nothing else reads what they overwrite: first a chain of pointwise ops (and, after a conv,
  linear or matmul, one norm), each the only reader of the last; then, where the chain's end is read by several
  pointwise ops (x * 0.5 * (1 + tanh(x))), all the pointwise ops reachable from it, when they end in one value.
  An epilogue does not end with a cast that only a reduction reads: the reduction takes it.
  A reduction (a sum, a mean, a cumsum, an argmax, ...) also takes the pointwise ops before it whose values only the
  region reads (cumsum(x * mask), mean((a - b) ** 2)): a kernel can apply them as it loads, the product never written;
  the region's epilogue taken, again (an RMSNorm's x.float(), read by the mean of its squares and by x * rsqrt(.)).
  A scan takes the flips torch spells a reverse scan with, flip(cumsum(flip(x, d), d), d), when only it reads them.
- softmax(q @ k^T ...) @ v, with only pointwise ops and masking between, is one attention region.
- What is left, runs of consecutive ops in graph order, is cut into its connected pieces: elementwise ops and
  free reshapes.
- A fixed node belongs to no region: one that reads only parameters and constants (a mask made from a buffer;
  each region that reads it holds its value, as a buffer), or one whose value is not a tensor (a size read from a
  tensor, arithmetic on sizes; written into the regions that read it as a constant).
Every region is convex (no path leaves it and comes back), so it runs as one call given its inputs.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import fx

from kernelcraft.propose.builtin.vocabulary import kind_of

_COPIES = {"clone", "alias", "contiguous", "detach"}  # free, yet a copy a pointwise chain may carry along
_MATMULS = ("linear", "matmul")  # kinds a norm may follow inside one region
_PROLOGUE_KINDS = ("reduce",)  # heads that also take the pointwise ops before them that only they read
_CASTS = {"_to_copy", "to", "float", "half", "bfloat16", "double", "type_as"}
_SCANS = ("cumsum", "cumprod")  # heads that also take the flips around them: torch's spelling of a reverse scan


def op_name(node: fx.Node) -> str:
    """The op a node calls, without namespace or overload: aten.linear.default, F.linear -> "linear"."""
    target = node.target
    if isinstance(target, str):
        return target
    packet = getattr(target, "_overloadpacket", None)  # an ATen OpOverload
    if packet is not None:
        return packet.__name__
    return getattr(target, "__name__", str(target))


def op_kind(node: fx.Node) -> str:
    """A heavy kind (one that starts a region), "pointwise", "free" (reshapes, views, copies), or "other": the
    vocabulary the kernel families declare (propose/builtin/vocabulary.py)."""
    return kind_of(op_name(node))


@dataclass
class Group:
    kind: str
    nodes: list[fx.Node]  # in graph order
    head: fx.Node | None = None  # the op that started the region (its name names the region), if one did

    @property
    def named_by(self) -> fx.Node:
        return self.head if self.head is not None else self.nodes[0]


def compute_nodes(graph: fx.Graph) -> list[fx.Node]:
    return [n for n in graph.nodes if n.op in ("call_function", "call_method")]


def constant_nodes(graph: fx.Graph) -> set[fx.Node]:
    """Compute nodes that read no placeholder, directly or through others: values fixed once the model is built."""
    varying: set[fx.Node] = set()
    for node in graph.nodes:
        if node.op == "placeholder" or any(i in varying for i in node.all_input_nodes):
            varying.add(node)
    return {n for n in compute_nodes(graph) if n not in varying}


def partition(graph: fx.Graph, constants: set[fx.Node]) -> list[Group]:
    """The graph's regions, in an order they can run in (each one's inputs made by those before it); `constants`
    are the fixed nodes (see the module's docstring)."""
    nodes = [n for n in compute_nodes(graph) if n not in constants]
    position = {n: i for i, n in enumerate(graph.nodes)}
    ancestors = _ancestors(graph)
    assigned: dict[fx.Node, int] = {}
    groups: list[Group] = []

    def claim(kind: str, members: list[fx.Node], head: fx.Node | None = None) -> None:
        for m in members:
            assigned[m] = len(groups)
        groups.append(Group(kind, sorted(members, key=position.get), head))

    for node in nodes:
        kind = op_kind(node)
        if node in assigned or kind in ("pointwise", "free", "other"):
            continue
        members = _attention(node, assigned, constants) if kind == "matmul" else None
        if members:
            kind = "attention"
        elif kind in _PROLOGUE_KINDS:
            members = [*_prologue(node, assigned, constants), node, *_flipped_back(node, assigned, constants)]
        members = _epilogue(_with_parts(members or [node]), kind, assigned, constants, ancestors)
        more = _prologue(node, assigned, constants, members) if kind in _PROLOGUE_KINDS else []
        if more and _convex(more + members, ancestors):  # x.float() read by x^2's mean and by x * rsqrt(.)
            members = more + members
        claim(kind, members, node)
    for run in _runs(nodes, assigned):
        for piece in _pieces(run):
            kinds = {op_kind(n) for n in piece}
            claim("layout" if kinds == {"free"} else "elementwise" if kinds <= {"free", "pointwise"} else "other",
                  piece)
    return _in_running_order(groups, assigned, position)


def _ancestors(graph: fx.Graph) -> dict[fx.Node, set[fx.Node]]:
    found: dict[fx.Node, set[fx.Node]] = {}
    for node in graph.nodes:
        found[node] = set().union(*(found[i] | {i} for i in node.all_input_nodes)) if node.all_input_nodes else set()
    return found


def _only_user(node: fx.Node) -> fx.Node | None:
    users = list(node.users)
    return users[0] if len(users) == 1 else None


def _open(node, assigned, constants) -> bool:
    return node is not None and node.op in ("call_function", "call_method") and node not in assigned \
        and node not in constants


def _attention(matmul: fx.Node, assigned, constants) -> list[fx.Node] | None:
    """matmul -> pointwise/masking -> softmax -> pointwise -> matmul reading the probabilities first, or None."""
    members, node, seen_softmax = [matmul], matmul, False
    while (user := _only_user(node)) is not None and _open(user, assigned, constants):
        kind = op_kind(user)
        if kind == "softmax" and not seen_softmax:
            seen_softmax = True
        elif kind == "matmul" and seen_softmax and user.args and user.args[0] is node:
            return members + [user]
        elif kind != "pointwise" and op_name(user) not in _COPIES:
            return None
        members.append(user)
        node = user
    return None


def _epilogue(members: list[fx.Node], kind: str, assigned, constants, ancestors) -> list[fx.Node]:
    """The region's head and the pointwise (and normalising) ops that follow it; see the module's docstring."""
    members = list(members)
    normed = kind == "norm"
    while (user := _only_user(members[-1])) is not None and _open(user, assigned, constants):
        step = op_kind(user)
        norm_ok = step == "norm" and kind in _MATMULS + ("conv",) and not normed
        if not (step == "pointwise" or op_name(user) in _COPIES or norm_ok) or not _convex(members + [user], ancestors):
            break
        normed = normed or norm_ok
        members = _with_parts(members + [user])  # a norm of an export graph returns (output, mean, rstd)
    fan = _pointwise_closure(members[-1], assigned, constants)
    if fan and _convex(members + fan, ancestors) and len(_outputs(members + fan)) == 1:
        members += fan
    while len(members) > 1 and _feeds_a_reduction(members[-1]):
        members.pop()  # the reduction takes it as it loads: the value is written once, in the dtype before the cast
    return members


def _feeds_a_reduction(node: fx.Node) -> bool:
    """A cast read only by pointwise ops and reductions, one of which reduces it or what it makes (the residual
    sum's x.float() before a model's last RMSNorm, read by x^2's mean and by x * rsqrt(.))."""
    users = list(node.users)
    reduces = {*_PROLOGUE_KINDS}
    return (op_name(node) in _CASTS and bool(users) and all(op_kind(u) in {"pointwise", *reduces} for u in users)
            and any(op_kind(u) in reduces or any(op_kind(w) in reduces for w in u.users) for u in users))


def _with_parts(members: list[fx.Node]) -> list[fx.Node]:
    """An op that returns several values (torch.max(x, dim): values and indices) with the reads of its parts
    (`[0]`, `.values`): a region's inputs and outputs are tensors, never the tuple."""
    tail = members[-1]
    parts = list(tail.users)
    if parts and all(op_name(u) in ("getitem", "getattr") and u.args and u.args[0] is tail for u in parts):
        return members + parts
    return members


def _flip_into(head: fx.Node, assigned, constants) -> fx.Node | None:
    """The flip a scan reads, when the scan is its only reader (flip(cumsum(flip(x, d), d), d): a reverse scan)."""
    if op_name(head) not in _SCANS or not head.args or not isinstance(head.args[0], fx.Node):
        return None
    flip = head.args[0]
    return flip if op_name(flip) == "flip" and _open(flip, assigned, constants) and _only_user(flip) is head else None


def _flipped_back(head: fx.Node, assigned, constants) -> list[fx.Node]:
    """The flip after a scan that read a flip, when it is the scan's only reader: the reverse scan's other half."""
    user = _only_user(head)
    if _flip_into(head, assigned, constants) is None or user is None or op_name(user) != "flip":
        return []
    return [user] if _open(user, assigned, constants) else []


def _prologue(head: fx.Node, assigned, constants, region: list[fx.Node] | None = None) -> list[fx.Node]:
    """The pointwise ops before `head` whose values only the region reads: its inputs, theirs, and so on up through
    pointwise ops (cumsum(x * mask): the product need never be written); a scan's flip first, and what feeds it.
    `region`: the region's nodes so far (its epilogue taken), whose readers count as the region's too."""
    flip = _flip_into(head, assigned, constants)
    if flip is not None and region is None:
        return [*_prologue(flip, assigned, constants), flip]
    region = region or [head]
    found: list[fx.Node] = []
    grew = True
    while grew:  # again until nothing joins: an op read by two that joined only joins after both
        grew = False
        inside = {*region, *found}
        for node in [i for m in (*region, *found) for i in m.all_input_nodes]:
            if node in inside or not _open(node, assigned, constants) or op_kind(node) != "pointwise":
                continue
            if all(u in inside for u in node.users):
                found.append(node)
                inside.add(node)
                grew = True
    return found


def _pointwise_closure(tail: fx.Node, assigned, constants) -> list[fx.Node]:
    """Every pointwise op reachable from `tail` through pointwise ops, when `tail` has several readers."""
    if len(tail.users) < 2:
        return []
    found, frontier = [], list(tail.users)
    while frontier:
        node = frontier.pop()
        if node in found or not _open(node, assigned, constants) or op_kind(node) != "pointwise":
            continue
        found.append(node)
        frontier.extend(node.users)
    return found


def _outputs(members: list[fx.Node]) -> list[fx.Node]:
    inside = set(members)
    return [m for m in members if any(u not in inside for u in m.users)]


def _convex(members: list[fx.Node], ancestors) -> bool:
    """No input of the region is made from one of its own nodes (the path would leave and come back)."""
    inside = set(members)
    return not any(i not in inside and ancestors[i] & inside for m in members for i in m.all_input_nodes)


def _runs(nodes: list[fx.Node], assigned) -> list[list[fx.Node]]:
    """Maximal runs of consecutive unassigned nodes, in graph order."""
    runs, current = [], []
    for node in nodes:
        if node in assigned:
            if current:
                runs.append(current)
            current = []
        else:
            current.append(node)
    return runs + ([current] if current else [])


def _pieces(run: list[fx.Node]) -> list[list[fx.Node]]:
    """A run's connected components (edges between its own nodes), each in graph order."""
    inside, parent = set(run), {n: n for n in run}

    def root(n):
        while parent[n] is not n:
            parent[n] = parent[parent[n]]
            n = parent[n]
        return n
    for node in run:
        for i in node.all_input_nodes:
            if i in inside:
                parent[root(i)] = root(node)
    pieces: dict[fx.Node, list[fx.Node]] = {}
    for node in run:
        pieces.setdefault(root(node), []).append(node)
    return list(pieces.values())


def _in_running_order(groups: list[Group], assigned: dict[fx.Node, int], position: dict) -> list[Group]:
    """The groups sorted so that each runs after the groups it reads from (Kahn's order, graph order on ties)."""
    needs = [{assigned[i] for n in g.nodes for i in n.all_input_nodes if i in assigned} - {k}
             for k, g in enumerate(groups)]
    done: list[int] = []
    while len(done) < len(groups):
        ready = [k for k in range(len(groups)) if k not in done and needs[k] <= set(done)]
        if not ready:
            raise ValueError("the regions depend on one another in a cycle")
        done.append(min(ready, key=lambda k: position[groups[k].nodes[0]]))
    return [groups[k] for k in done]
