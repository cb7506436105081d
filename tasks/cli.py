"""The ``daybreak`` console script. Luigi is imported only once its config files are checked, so a bad
one is one line and exit 2, not a traceback from ``import luigi``."""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
from pathlib import Path
from typing import NoReturn

from tasks import catalogue, guard
from tasks.faults import FAULT_EXIT, check_stores, fault_line
from tasks.guard import Exit, check_range

DATASET_NAMES = catalogue.names()  # what status, plan and preview take: every dataset


def _date(text: str) -> dt.date:
    """A date as Luigi's ``DateParameter`` reads one (``2026-09-01``, and ``2026-9-1`` too)."""
    try:
        return dt.datetime.strptime(text, "%Y-%m-%d").date()  # noqa: DTZ007 - a date, no time of day
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a date (YYYY-MM-DD)") from None


def cmd_sample(args: argparse.Namespace) -> int:
    from tasks import reference, sample, settings, settings_check

    uri = args.raw_root or settings.raw_root()
    if "://" in uri:  # Path("sftp://u@h/p") is the local folder "sftp:/u@h/p"
        where = (
            "--raw-root"
            if args.raw_root
            else f"[daybreak] raw_root from {settings_check.source_of('daybreak', 'raw_root')}"
        )
        guard.fail(f"raw_root {uri} ({where}) is not a local folder: the sample is written to one; give --raw-root")
    root = Path(uri)
    try:
        summary = sample.generate(
            root,
            args.start,
            args.days,
            stores=args.stores,
            seed=args.seed,
            include_late=args.late,
            hotels_csv=reference.hotels_source(),
        )
    except sample.SampleExists as exc:
        guard.fail(f"sample: {exc}")
    print(f"sample raw zone in {root}: " + ", ".join(f"{k} {v}" for k, v in summary.items()))
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from tasks.views import status, status_html

    start = args.start or status.default_start([args.dataset] if args.dataset else None)
    stop = args.stop or status.default_stop()
    _stop_before_default_start("status", args, start)
    if args.stop is None and start > stop:
        stop = start  # --start after the newest raw folder: nothing to show, not a reversed range
    if start >= stop:  # the datasets of one partition per date have no row to show: say so, not nothing
        print(f"no date from {start} to {stop} (stop exclusive): the dated datasets have none", file=sys.stderr)
    rows = status.collect(start, stop, [args.dataset] if args.dataset else None)
    if args.html:
        try:
            Path(args.html).write_text(status_html.render(rows), encoding="utf-8")
        except OSError as exc:
            guard.fail(f"--html {args.html}: cannot write it: {exc.strerror or exc}")
        print(f"wrote {args.html}")
    if args.json:
        print(status.render_json(rows))
    else:
        from tasks import hotels, reference

        print(status.render_text(rows))
        hotel_datasets = {d.name for d in catalogue.DATASETS if d.task.__module__ == hotels.__name__}
        if any(r.dataset in hotel_datasets for r in rows):  # the list their partitions are made of
            print(f"hotels: {', '.join(reference.hotels())} (from {reference.hotels_source()})")
    return 0


def _stop_before_default_start(what: str, args: argparse.Namespace, start: dt.date) -> None:
    """One line, exit 2, for a --stop given alone before the default --start (not a reversed --start)."""
    if args.start is None and args.stop is not None and args.stop < start:
        guard.fail(
            f"{what}: --stop {args.stop} is before the default --start {start} ([daybreak] start_date, or the "
            "first partition kept from before it): give --start too"
        )


def cmd_plan(args: argparse.Namespace) -> int:
    from tasks.views import plan, status

    start = args.start or status.default_start([args.dataset])
    stop = args.stop or max(status.default_stop(), start)
    _stop_before_default_start("plan", args, start)
    result = plan.make_plan(args.dataset, start, stop, args.workers)
    print(plan.render(result))
    return result.exit_code


def cmd_preview(args: argparse.Namespace) -> int:
    from tasks import preview

    record, code = preview.make(args.dataset, args.start, args.stop, args.workers)
    print(preview.to_json(record) if args.json else preview.render(record))
    return code


def cmd_publish(args: argparse.Namespace) -> int:
    from tasks import preview

    try:
        code, message = preview.publish(args.id)
    except preview.PreviewError as exc:
        guard.fail(str(exc))
    print(message, file=sys.stdout if code == 0 else sys.stderr)
    return code


def cmd_discard(args: argparse.Namespace) -> int:
    from tasks import preview

    try:
        print(preview.discard(args.id))
    except preview.PreviewError as exc:
        guard.fail(str(exc))
    return 0


def cmd_previews(args: argparse.Namespace) -> int:
    import json

    from tasks import preview

    for pid in preview.sweep():
        print(f"swept preview {pid}: older than [daybreak] preview_keep_days", file=sys.stderr)
    rows = preview.listing()
    print(json.dumps(rows, indent=1) if args.json else preview.render_listing(rows))
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    from tasks import settings, verify
    from tasks.views import status

    start = args.start or settings.daybreak().start_date
    stop = args.stop or status.default_stop()
    if start > stop and (args.start is None or args.stop is None):
        first = f"--start {start}" if args.start else f"[daybreak] start_date {start}"
        last = f"--stop {stop}" if args.stop else f"the day after the newest raw folder ({stop})"
        guard.fail(f"verify: {first} is after {last}: no partition to verify; give --start and --stop")
    check_range(start, stop, "verify")
    report = verify.verify(start, stop, [args.dataset] if args.dataset else None)
    print(verify.render(report))
    return 1 if report.mismatches else 0


def cmd_scheduler(args: argparse.Namespace) -> int:
    from tasks import luigid

    return luigid.run(args.address, args.port)


def cmd_demo(args: argparse.Namespace) -> int:
    from tasks import demo

    steps = demo.run_demo(Path(args.workdir), args.start, args.days, args.stores, args.workers, args.seed)
    table = demo.render(steps, args.stores, args.days, args.workers)
    print(table)
    for path in demo.write_output(Path(args.workdir), table, args.update_docs):
        print(f"wrote the table into {path}")
    return 0 if all(s.exit_code == 0 for s in steps) else 1


# a preview stopped half-way is removed whole (tasks/preview/build.py): nothing of it is kept to finish
PREVIEW_INTERRUPTED = (
    "daybreak: interrupted: the preview was removed and production is unchanged; run the same command again to make it"
)

# commands that commit nothing: the store is not asked whether it honours conditional writes
READ_ONLY = (cmd_status, cmd_plan)
SAMPLE_INTERRUPTED = (
    "daybreak: interrupted: the raw files written so far are whole; run the same command again to write the rest"
)


def interrupted_line(func) -> str:
    """What Ctrl-C of the command ``func`` runs says: what it leaves behind."""
    if func is cmd_preview:
        return PREVIEW_INTERRUPTED
    if func is cmd_sample:
        return SAMPLE_INTERRUPTED
    return "daybreak: interrupted: nothing was changed" if func in READ_ONLY else guard.INTERRUPTED


class _Parser(argparse.ArgumentParser):
    """A usage error is one line and exit 2; an option is taken only as spelled in full."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **{**kwargs, "allow_abbrev": False})

    def error(self, message: str) -> NoReturn:
        command = self.prog.removeprefix("daybreak").strip()
        print(f"daybreak: error: {command + ': ' if command else ''}{message} ({self.prog} --help)", file=sys.stderr)
        sys.exit(guard.USAGE_EXIT)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="daybreak",
        description="Daybreak's views and tools beside Luigi's backfills: what is stale and why, what a "
        "backfill would run, previews, sample data. Backfills run with `luigi --module tasks RangeDaily ...` "
        "(docs/backfills.md).",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("sample", help="write a deterministic sample raw zone")
    p.add_argument("--start", type=_date, default=dt.date(2026, 9, 1), help="first business date (inclusive)")
    days = guard.count_argument(1, guard.MAX_RANGE_DAYS)
    p.add_argument("--days", type=days, default=60, help="number of business dates")
    p.add_argument("--stores", type=guard.count_argument(1, 9999), default=50)
    p.add_argument("--seed", type=guard.count_argument(0), default=1)
    p.add_argument("--raw-root", help="folder to write (default: [daybreak] raw_root)")
    p.add_argument("--late", action="store_true", help="also write the one late-arriving file")
    p.set_defaults(func=cmd_sample)

    p = sub.add_parser("status", help="ok / stale / missing / waiting / failed per dataset and day")
    p.add_argument("--dataset", type=guard.dataset_argument(DATASET_NAMES), choices=DATASET_NAMES)
    p.add_argument(
        "--start",
        type=_date,
        help="first date, inclusive (default: [daybreak] start_date, or the first partition kept from before it)",
    )
    p.add_argument(
        "--stop", type=_date, help="last date, exclusive (default: the day after the newest raw folder of any source)"
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--html", metavar="FILE", help="also write a self-contained HTML grid to FILE")
    p.set_defaults(func=cmd_status)

    p = sub.add_parser(
        "plan",
        help="dry run of a backfill: what would run and why; exit 0 nothing to do, 1 work to do, 20 only waiting, "
        "10 only newer builds",
    )
    p.add_argument("dataset", type=guard.dataset_argument(DATASET_NAMES), choices=DATASET_NAMES)
    p.add_argument("--start", type=_date, help="first date, inclusive (default: as for status)")
    p.add_argument("--stop", type=_date, help="last date, exclusive (default: as for status)")
    p.add_argument("--workers", type=guard.count_argument(1), default=1, help="for the time estimate")
    p.set_defaults(func=cmd_plan)

    p = sub.add_parser(
        "preview", help="build what a backfill of the range would change into a shadow root and show the diff"
    )
    dated = catalogue.names("date")  # a preview builds what RangeDaily would: one partition per date
    not_dated = (
        "{name} is not one partition per date: a preview takes {known} "
        "(daybreak plan {name} says what a backfill of it would run)"
    )
    p.add_argument("dataset", type=guard.dataset_argument(dated, not_dated), choices=dated)
    p.add_argument("--start", type=_date, required=True, help="first date, inclusive")
    p.add_argument("--stop", type=_date, required=True, help="last date, exclusive")
    p.add_argument("--workers", type=guard.count_argument(1), default=1, help="Luigi workers for the builds")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_preview)

    p = sub.add_parser("publish", help="put a preview's partitions in place, each under its lock; resumable")
    p.add_argument("id", help="the preview id (daybreak previews)")
    p.set_defaults(func=cmd_publish)

    p = sub.add_parser("discard", help="delete a preview")
    p.add_argument("id", help="the preview id (daybreak previews)")
    p.set_defaults(func=cmd_discard)

    p = sub.add_parser("previews", help="list previews: age, range, size, whether each can be published")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_previews)

    p = sub.add_parser(
        "verify",
        help="re-hash raw inputs and data files against their manifests; mark mismatches stale; exit 1 on any",
    )
    verified = catalogue.names()
    p.add_argument("--dataset", type=guard.dataset_argument(verified), choices=verified)
    p.add_argument("--start", type=_date, help="first date, inclusive (default: [daybreak] start_date)")
    p.add_argument(
        "--stop", type=_date, help="last date, exclusive (default: the day after the newest raw folder of any source)"
    )
    p.set_defaults(func=cmd_verify)

    p = sub.add_parser(
        "scheduler", help="run luigid on 127.0.0.1 with state, logs and SQLite history under the data root"
    )
    p.add_argument("--address", default="127.0.0.1", help="bind address (luigid has no authentication)")
    p.add_argument("--port", type=guard.count_argument(1, 65535), default=8082)
    p.set_defaults(func=cmd_scheduler)

    p = sub.add_parser("demo", help="measure backfills after each kind of change; writes WORKDIR/backfills.md")
    p.add_argument(
        "--workdir",
        default="data/demo",
        help="scratch folder, emptied and used again (a new, empty or earlier demo folder only); holds the table",
    )
    p.add_argument("--update-docs", action="store_true", help="also write the table into README.md, docs/backfills.md")
    p.add_argument("--start", type=_date, default=dt.date(2026, 9, 1))
    # its steps build the first 10 days, then hold back one store's file of a day: 12 days and 2 stores at least
    p.add_argument("--days", type=guard.count_argument(12, guard.MAX_RANGE_DAYS), default=60)
    p.add_argument("--stores", type=guard.count_argument(2, 9999), default=50)
    p.add_argument("--workers", type=guard.count_argument(1), default=2)
    p.add_argument("--seed", type=guard.count_argument(0), default=1)
    p.set_defaults(func=cmd_demo)
    return parser


def check_args(args: argparse.Namespace) -> None:
    """Every date and range of the command line, by the one check every command shares (tasks/guard.py)."""
    guard.check_range(getattr(args, "start", None), getattr(args, "stop", None), args.command)
    if getattr(args, "days", None) is not None and getattr(args, "start", None) is not None:
        guard.check_range(args.start, args.start + dt.timedelta(days=args.days), args.command)
    if getattr(args, "html", None):
        folder = Path(args.html).parent
        if not folder.is_dir() or not os.access(folder, os.W_OK):
            guard.fail(f"--html {args.html}: cannot write there ({folder} is not a folder this user can write to)")


def main(argv: list[str] | None = None) -> int:
    """Run a ``daybreak`` command: exit 2 for a usage error, 30 for a store or server error, 141 on a closed pipe."""
    args = build_parser().parse_args(argv)
    from tasks import configfiles

    unreadable = configfiles.errors()  # before Luigi reads them: `import luigi` would raise
    if unreadable:
        for line in unreadable:
            print(f"daybreak: error: {line}", file=sys.stderr)
        return guard.USAGE_EXIT
    import luigi.configuration

    from tasks import settings_check

    luigi.configuration.get_config()  # reads ./luigi.cfg and $LUIGI_CONFIG_PATH like the luigi command
    guard.stop_on_sigterm()
    try:
        settings_check.check_config()
        check_args(args)
        if args.func not in (cmd_sample, cmd_demo, cmd_scheduler):  # their own roots; luigid never reads one
            check_stores(writes=args.func not in READ_ONLY)
        code = args.func(args)
        sys.stdout.flush()  # a closed pipe shows here, not at interpreter exit
        return code
    except Exit as exc:  # its message is on stderr already
        return exc.code
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return 141
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM (guard.stop_on_sigterm): one line, not a traceback
        print(interrupted_line(args.func), file=sys.stderr, flush=True)
        return guard.TERMINATED_EXIT if isinstance(exc, guard.Terminated) else guard.INTERRUPTED_EXIT
    except Exception as exc:  # a store or server error: one line, exit 30; any other error keeps its traceback
        line = fault_line(exc)
        if line is None:
            raise
        print(f"daybreak: error: {line}", file=sys.stderr, flush=True)
        return FAULT_EXIT


if __name__ == "__main__":
    sys.exit(main())
