"""What the transposed conv's rules rest on (propose/builtin/evidence.py): KernelBench's transposed convs at their
published sizes, each move as a first kernel against the one before it."""

from __future__ import annotations

from kernelcraft.propose.builtin.evidence import Evidence

H100 = "NVIDIA H100 80GB HBM3"

EVIDENCE = (
    Evidence("moves", "the 3xTF32 taps move first",
             "the taps move beat the packed first move on 7 of 8 transposed-conv problems in one sweep (level 1: 57, "
             "65, 69; level 2: 10, 11, 19, 42; by 9 to 70%) and lost 4% on level 1's 81 (dilated)",
             H100, ("moves-conv-transpose-h100-2026-11-26.json",), "0209f64"),
    Evidence("kernels.TAPS_MIN_CHUNKS", "2",
             "as first kernels with the taps loop at any group of 32+ in-channels, it took 10 to 53% off level 1's "
             "57, 64, 65, 69, 78 and level 2's 10, 11, 19, 42, and added 4 to 65% to level 1's 71, 74, 75, 79, 81: "
             "every loser has 32 or fewer in-channels a group (one chunk), every winner but 78 64 or more. At two "
             "chunks the losers are back at their packed times and the winners keep theirs (78 goes back too)",
             H100, ("kernelbench-level1-session-h100-2026-11-26.json", "kernelbench-level2-session-h100-2026-11-26.json",
                    "kernelbench-level1-convt-h100-2026-11-26.json", "kernelbench-level2-convt-h100-2026-11-26.json"),
             "9b77938"),
    Evidence("kernels.AS_CONV_PLANES", "(2 ** 16, 2 ** 18)",
             "the conv it equals (stride 1, no output padding) at every size, against the taps first move: level 1's "
             "57 29.4 -> 20.3 ms, 64 10.2 -> 9.3, 65 16.6 -> 12.0, 71 4.96 -> 4.35, 74 3.52 -> 2.47, 78 11.1 -> 9.7, "
             "level 2's 19 32.2 -> 28.3 faster; level 1's 69 12.6 -> 13.2, level 2's 10 16.3 -> 21.2, 11 5.9 -> 6.6, "
             "42 16.2 -> 16.9 slower. The losers but 42 have planes under 2**16 elements or the taps loop on planes "
             "under 2**18. With the rule 57, 65, 71, 74, 78 keep their gains, 64, 69, 10, 11, 19 their taps times, "
             "and 42 loses 5%",
             H100, ("kernelbench-level1-asconv-h100-2026-11-27.json", "kernelbench-level2-asconv-h100-2026-11-27.json",
                    "kernelbench-level1-asconv-rule-h100-2026-11-27.json",
                    "kernelbench-level2-asconv-rule-h100-2026-11-27.json"), "56aa984"),
    Evidence("moves", "the conv it equals on the conv family's shifted rows where they apply",
             "one group, more than one tap, 3xTF32 on a Hopper GPU, planes of any size: level 1's 57 20.2 -> 9.9 ms, "
             "64 10.3 -> 7.1, 65 12.1 -> 4.8, 69 12.5 -> 5.5 (0.61 -> 1.39x torch.compile), 71 4.4 -> 2.5, 78 9.9 -> "
             "4.3, level 2's 10 16.3 -> 11.4, 11 5.9 -> 3.2, 19 32.3 -> 13.8, 42 17.1 -> 8.0, the 1-D dilated 74 2.49 "
             "-> 2.39",
             H100, ("kernelbench-level1-shifted-h100-2026-11-27.json", "kernelbench-level1-narrow-h100-2026-11-27.json",
                    "kernelbench-level2-shifted-h100-2026-11-27.json"), "b637548"),
    Evidence("kernels.SHORT_PHASES", "1.0",
             "every phase in one launch against a launch per phase, by CPG times an output's mean taps in channel "
             "tiles: won at 0.18 (level 1's 81: 3.31 -> 1.98 ms, past torch.compile's 2.82) and 0.75 (79: 2.85 -> "
             "2.50, past 2.75), lost at 1.12 (level 2's 36, 44: 1.37 -> 1.54), 1.25 (level 1's 75: 2.15 -> 3.50) "
             "and 2.25 (level 2's 2, 16: 5.90 -> 10.31, 7.24 -> 11.19), tied at 2.0 (level 2's 91, 93: 5.40 -> 5.43, "
             "4.89 -> 4.64)",
             H100, ("params-probe-onelaunch-l1-h100-2026-11-27.json", "params-probe-onelaunch-l2-h100-2026-11-27.json"),
             "b7e8889"),
)
