"""kernelcraft as a reward and an environment for training kernel-writing models (docs/rl.md).

- `compute_score` / `compute_score_batch`: verl's custom reward function signatures, reading the problem from the
  row `kernelcraft export --kind rl` writes (reward.py);
- `Scorer`: batched, asynchronous scoring through the verifier's pool (or any verifier with its interface), verdicts
  cached by source hash (scorer.py, cache.py);
- `RewardShape`, `Score`: how a verdict becomes a reward, and its parts (shape.py);
- `KernelEnv`: reset(problem) / step(answer), the observation being a refine turn's feedback (env.py);
  `KernelInteraction`: the same as a verl multi-turn interaction (interaction.py).
"""

from kernelcraft.rl.cache import VerdictCache
from kernelcraft.rl.env import KernelEnv
from kernelcraft.rl.interaction import KernelInteraction, with_interaction
from kernelcraft.rl.reward import compute_score, compute_score_batch, scorer_for
from kernelcraft.rl.scorer import Batch, Scorer
from kernelcraft.rl.shape import RewardShape, Score, score_verdict
from kernelcraft.rl.task import Settings, Task

__all__ = ["Batch", "KernelEnv", "KernelInteraction", "RewardShape", "Score", "Scorer", "Settings", "Task",
           "VerdictCache", "compute_score", "compute_score_batch", "score_verdict", "scorer_for", "with_interaction"]
