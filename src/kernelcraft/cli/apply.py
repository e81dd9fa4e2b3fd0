"""`kernelcraft apply MODEL` (or `--resume APPLY`): make a whole model faster. Profile it, cut it into regions
(each written as a problem under --out/regions), optimize each region, verify the model with its faster regions
replaced end to end, and write it to --out/model_new.py. With --json the last line of stdout is one JSON object;
progress goes to stderr."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from kernelcraft.cli.common import EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, add_search_args, amount, search_options, \
    show, usage_errors

NAME = "apply"


def add_parser(sub) -> None:
    p = sub.add_parser(NAME, help="make a whole model faster: optimize its hot regions and swap the kernels in")
    p.add_argument("target", metavar="MODEL", nargs="?",
                   help="a Python file defining `model` (an nn.Module, or a function returning one) and "
                        "`example_inputs` (a tensor or a list of them, or a function returning them), its weights "
                        "kept; or a KernelBench-format file (Model, get_inputs, get_init_inputs); or a suite name")
    p.add_argument("--resume", metavar="APPLY", help="continue a stopped apply (its settings are stored)")
    p.add_argument("--list", action="store_true", help="list the store's applies and exit")
    p.add_argument("--show", metavar="APPLY", help="show a stored apply (an id or a unique prefix) and exit")
    p.add_argument("--budget-minutes", type=amount(), default=None,
                   help="the whole apply's wall time: capture, profile, the regions' runs (split by their share "
                        "of the model's time) and the end-to-end verdicts (at real sizes on a GPU, 5 or more)")
    p.add_argument("--min-share", type=amount(0.0, 1.0, low_allowed=True), default=0.02,
                   help="regions under this share of the model's time stay as they are (default 0.02)")
    p.add_argument("--replace", choices=["faster", "correct"], default="faster",
                   help="the regions whose kernels go into the model: those faster than PyTorch (default), or every "
                        "one with a correct kernel (to check the kernels in the model where none can be faster)")
    add_search_args(p, cluster=False)
    p.set_defaults(out=None)  # apply writes a directory: kernelcraft-apply-MODEL unless --out names one


def run(args) -> int:
    from kernelcraft import api
    from kernelcraft.errors import ApplyInterrupted
    from kernelcraft.cli.progress import Progress
    from kernelcraft.cli.run import terminate_as_interrupt
    from kernelcraft.report.apply import apply_view

    if args.list or args.show:
        with usage_errors(NAME):
            found = api.applies(store=args.store) if args.list else api.apply_summary(args.show, store=args.store)
        if args.json:
            print(json.dumps(found))
        elif args.list:
            from kernelcraft.report.apply import applies_view

            show(applies_view(found))
        else:
            show(apply_view(found))
        return EXIT_OK
    progress = Progress()
    with usage_errors(NAME):
        prepared = api.prepare_apply(args.target, resume=args.resume, store=args.store,
                                     out_dir=Path(args.out) if args.out else None,
                                     budget_minutes=args.budget_minutes, min_share=args.min_share,
                                     replace=args.replace,
                                     on_event=progress.event, **search_options(args))
    print(f"{prepared.problem.name}: {prepared.sizes.describe()}; regions and the model with its kernels go to "
          f"{prepared.out_dir}", file=sys.stderr)
    try:
        with progress, terminate_as_interrupt():
            outcome = prepared.run(progress.event)
    except ApplyInterrupted as stop:
        print(f"kernelcraft apply: interrupted; apply {stop.apply_id} is stored as stopped, and "
              f"`kernelcraft apply --resume {stop.apply_id}` goes on from there", file=sys.stderr)
        return EXIT_INTERRUPTED
    summary = outcome.to_dict()
    if args.json:
        print(json.dumps(summary))
    elif not outcome.error or outcome.regions:  # a model that could not be cut is said in one line, below
        show(apply_view(summary))
    if outcome.error:  # the model could not be captured or cut into problems: the input, as the line says
        print(f"kernelcraft apply: {outcome.error}", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_OK
