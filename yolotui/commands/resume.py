"""`yolotui resume [RUN|PATH] [--epochs N] [--batch-size B] [--device D] [--workers W]`.

Continues a run from weights/last.pt at the next batch of the interrupted epoch, with the run's saved options.
Only --epochs, --batch-size (accumulation re-derived, nominal batch 64 kept), --device and --workers may
change; any other training flag is an error. `--epochs N` above the planned total extends the run (also a
finished one): the LR schedule is re-planned as if N epochs had been planned from the start, and training
continues at the current epoch on that curve. With no RUN, the newest interrupted run is resumed.
`--interrupted` resumes every interrupted run of the user, each as it was (yolotui/placement/service.py): what
`yolotui service install` runs at boot. It prints the command the resumed run runs; a run folder another
user owns is refused unless --force. A command, env or logging config in run.yaml that this user's yolotui
did not write (restored, copied in, edited) is shown and needs a `y` on a terminal, or --trust. The work itself
is yolotui.jobs.resume.
"""

from __future__ import annotations

import argparse

from yolotui.errors import UserError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """RUN plus the four changeable options; the other training flags are accepted only to be refused."""
    from yolotui.commands._distributed import add_distributed_flags
    from yolotui.commands._options import add_batch, add_json
    from yolotui.commands.train import TRAIN_FLAGS, add_aliased

    parser.add_argument("run", nargs="?", default=None, metavar="RUN|PATH",
                        help="run folder or name, or its weights/last.pt (default: newest interrupted run)")
    parser.add_argument("--epochs", type=int, default=None, help="total epochs: above the plan extends the run")
    add_batch(parser, help="new total batch size (accumulation re-derived; default: the run's)")
    parser.add_argument("--device", default=None, help="new device: 0, 0,1 or cpu (default: the run's)")
    parser.add_argument("--workers", type=int, default=None, help="data loader workers (default: the run's)")
    parser.add_argument("--attach", action="store_true", help="follow progress here; Ctrl-C detaches")
    add_json(parser)
    parser.add_argument("--from", dest="from_ckpt", default=None, metavar="CKPT",
                        help="resume from this checkpoint of the run (best.pt, epochN.pt) when last.pt is damaged; "
                             "the damaged last.pt is kept as last.pt.damaged-<time>")
    parser.add_argument("--interrupted", action="store_true",
                        help="resume every interrupted run of yours (after a reboot or container restart)")
    parser.add_argument("--force", action="store_true",
                        help="resume a run folder another user owns (it runs what its run.yaml and opt.yaml say: "
                             "read them first)")
    parser.add_argument("--trust", action="store_true",
                        help="run the command, env and logging config of a run.yaml that yolotui did not write here "
                             "(a restored or copied folder) without asking")
    changeable = {"--epochs", "--batch-size", "--device", "--workers"}
    for flags, kwargs in TRAIN_FLAGS:
        if changeable.intersection(flags):
            continue
        options = {k: v for k, v in kwargs.items() if k in ("dest", "action", "nargs", "const", "type")}
        add_aliased(parser, flags, **options, default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    add_distributed_flags(parser)  # the process layout may change (a new rendezvous host, more CPU processes)
    from yolotui.commands._runflags import add_run_flags

    add_run_flags(parser)  # given again: they replace the run's; not given: the run's are kept
    from yolotui.commands._trackerflags import add_tracker_flags

    add_tracker_flags(parser)
    from yolotui.commands._slurm import add_slurm_flags

    add_slurm_flags(parser)  # a run that ran as a SLURM job resumes as one (its recorded options) by default


def run(args: argparse.Namespace) -> int:
    """Refuse unchangeable flags, then resume."""
    if args.interrupted:  # after a reboot, each run continues with its own saved settings
        if args.run or any(v is not None for v in (args.epochs, args.batch_size, args.device, args.workers,
                                                    args.from_ckpt)):
            raise UserError("--interrupted resumes every interrupted run as it was: give no RUN and no options")
        from yolotui.commands.service import print_resume_interrupted

        return print_resume_interrupted()
    from yolotui.commands._distributed import given_layout
    from yolotui.commands._launch import after_launch, ask_on_terminal
    from yolotui.commands._runflags import extras_from
    from yolotui.commands._slurm import slurm_options
    from yolotui.commands.train import given_options
    from yolotui.jobs.resume import ResumeRequest, refuse_unchangeable, resume

    refuse_unchangeable(given_options(args), "cannot be changed on resume: a resumed run keeps its options; only "
                        "--epochs, --batch-size, --device and --workers may change (use `yolotui finetune` for a "
                        "new run)")
    result = resume(ResumeRequest(args.run, args.epochs, args.batch_size, args.device, args.workers,
                                  layout=given_layout(args), from_ckpt=args.from_ckpt,
                                  extras=extras_from(args), slurm=slurm_options(args), force=args.force,
                                  trust=args.trust, confirm=ask_on_terminal))
    return after_launch(result, args.attach, args.json, show_command=True)
