"""torch.cat read as a cat op inside a chain and rendered by the cat family (each part copied into its slice), and
views whose sizes are read at run time (x.view(x.size(0), -1)): right against torch on several shapes and dims."""

import pytest

from kernelcraft.propose.builtin.analyze import analyze
from tests.propose.builtin.chain_check import check_chain
from tests.propose.builtin.test_analyze import write

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def test_cat_reads_its_parts_and_keeps_what_they_need(tmp_path):
    analysis = analyze(write(tmp_path, "a = torch.relu(x)\nb = x * 2.0\nreturn torch.cat([a, b, x], dim=1)", ""))
    assert [(op.kind, op.src) for op in analysis.chain] == [("elementwise", "x"), ("elementwise", "x"), ("cat", 0)]
    assert analysis.chain[-1].detail == {"dim": 1, "parts": [0, 1, "x"]}
    refused = analyze(write(tmp_path, "return torch.cat([x, x], dim=self.d)", "self.d = torch.tensor(1)"))
    assert "cat" in refused.unsupported


@pytest.mark.parametrize("forward, cases, args", [
    ("return torch.cat([torch.relu(x), x * 2.0, x], dim=1)", [[(4, 3, 5)], [(1, 1, 2)], [(2, 0, 3)]], "x"),
    ("return torch.cat((x, torch.sigmoid(y)), -1)", [[(3, 5), (3, 2)], [(1, 7), (1, 1)]], "x, y"),
    ("return torch.cat([x, y], 0) * 0.5", [[(2, 3), (5, 3)], [(1, 4), (1, 4)]], "x, y"),
])
def test_cat_matches_torch(tmp_path, forward, cases, args):
    check_chain(tmp_path, forward, "", cases, args=args)


def test_views_of_sizes_read_at_run_time(tmp_path):
    ops, source = check_chain(tmp_path, "y = torch.relu(x * 3.0)\nreturn torch.sigmoid(y.view(y.size(0), -1))", "",
                              [[(4, 3, 5)], [(2, 7, 1)]])
    assert ops[1].kind == "view" and ops[1].detail == {"shape": [["size", 0, 0], -1]}
    check_chain(tmp_path, "return torch.tanh(x.reshape(x.shape[0], x.size(1), -1) * 2.0).sum(-1)", "",
                [[(2, 3, 4, 5)], [(1, 2, 1, 3)]])
