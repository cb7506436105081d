"""The dataset catalogue is the one place a dataset is declared: the docs, the tasks, the status view
and the CLI's choices follow it; a task class names the entry it builds."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

import pytest

from tasks import catalogue
from tests.conftest import qsr_rows

pytestmark = pytest.mark.luigi

DOCS = Path(__file__).resolve().parent.parent / "docs" / "datasets.md"
DAY = dt.date(2026, 9, 10)


def test_the_docs_table_is_the_catalogue():
    text = DOCS.read_text(encoding="utf-8")
    table = [line for line in text.splitlines() if line.startswith("|")]
    expected = catalogue.markdown_table().splitlines()
    assert table == expected, (
        "docs/datasets.md's datasets table differs from tasks/catalogue.py; run `python -m tasks.docs`"
    )
    marked = text.split("<!-- datasets:start -->\n", 1)[1].split("<!-- datasets:end -->", 1)[0]
    assert marked.splitlines() == expected  # between the markers that `python -m tasks.docs` rewrites


# What a user runs to build one dataset over DAY (docs/datasets.md, "Build"), by partition kind, and
# the partition folders it writes under the dataset's path (hotels: config/hotels.csv; stores: the
# sample's two).
HOTELS = ("H1", "H2", "H3", "H4", "H5")
STORES = ("S001", "S002")
COMMANDS = {
    "date": lambda family: [[family, "--date", str(DAY)]],
    "date x hotel": lambda family: [[family, "--date", str(DAY), "--hotel", h] for h in HOTELS],
    "hotel": lambda family: [[family, "--hotel", h] for h in HOTELS],
    "store": lambda family: [["AllStores"]],
    "none": lambda family: [[family]],
}
FOLDERS = {
    "date": [f"business_date={DAY}"],
    "date x hotel": [f"business_date={DAY}/hotel_id={h}" for h in HOTELS],
    "hotel": [f"hotel_id={h}" for h in HOTELS],
    "store": [f"store_id={s}" for s in STORES],
    "none": ["."],
}


@pytest.mark.parametrize("spec", catalogue.DATASETS, ids=lambda s: s.name)
def test_each_entry_s_task_writes_under_its_path_and_status_shows_it_built(spec, lab, setting, capsys):
    """The task the entry names, run through Luigi on a small raw zone, writes the entry's partitions
    under its path, each manifest with its dataset, family and version; ``daybreak status --dataset``
    then shows the dataset built."""
    import json

    from tasks import sample
    from tasks.cli import main

    setting("daybreak", "start_date", DAY)
    sample.generate(lab.raw, DAY, 2, stores=len(STORES), seed=1, mean_lines_per_store=10)
    family = spec.task.get_task_family()
    for command in COMMANDS[spec.partition](family):
        assert lab.luigi(*command, "--workers", "1") == 0, command
    for folder in FOLDERS[spec.partition]:
        manifest = json.loads((lab.data / spec.path / folder / "_manifest.json").read_text())
        assert manifest["dataset"] == spec.path
        assert manifest["task_id"].startswith(f"{family}_")
        assert manifest["rules"]["version"] == spec.version
    capsys.readouterr()
    assert main(["status", "--dataset", spec.name, "--start", str(DAY), "--stop", str(DAY + dt.timedelta(days=1))]) == 0
    shown = capsys.readouterr().out.splitlines()[1:]  # after the legend
    assert shown[0].startswith(f"{spec.name}  "), shown
    states = " ".join(shown[:3]) if spec.partition in ("date", "date x hotel") else shown[0]
    assert states.endswith((" ok", " provisional")), shown  # ads: provisional until export D+7


def test_every_source_has_its_contract_section_and_a_sample_writer():
    from tasks import sample

    contract = (DOCS.parent / "raw-zone.md").read_text(encoding="utf-8")
    for source in catalogue.SOURCES:
        assert f"\n  {source}/<" in contract, f"docs/raw-zone.md lays out no folder {source}/"
    assert list(sample.WRITERS) == list(catalogue.SOURCES)  # `daybreak sample` writes every source, in order


def test_an_entry_has_one_task_and_takes_keywords_only():
    from tasks.base import PartitionedTask

    with pytest.raises(TypeError, match="takes 1 positional argument"):
        catalogue.Dataset("x", "staging/x", "date", "one row", ("k",), "x/1", "raw x/D")  # type: ignore[misc]
    with pytest.raises(ValueError, match=r"^dataset x: partition 'day' is not one of date, date x hotel"):
        catalogue.Dataset(name="x", path="x", partition="day", grain="", key=(), version="x/1", reads="")
    assert catalogue.STG_QSR_POS.task.entry is catalogue.STG_QSR_POS
    with pytest.raises(
        TypeError,
        match=r"^dataset stg_qsr_pos: tests.test_catalogue.Copy names it, built by tasks.qsr.StgQsrPos already$",
    ):

        class Copy(PartitionedTask, entry=catalogue.STG_QSR_POS):
            pass

    assert catalogue.STG_QSR_POS.task.__name__ == "StgQsrPos"
    unbuilt = catalogue.Dataset(name="x", path="x", partition="none", grain="", key=(), version="x/1", reads="")
    with pytest.raises(LookupError, match=r"^dataset x: no task class names it \(entry=\) in TASK_MODULES \(tasks"):
        unbuilt.task  # noqa: B018


def test_the_morning_refresh_builds_what_the_catalogue_marks(lab, setting):
    from tasks.backfill import MorningRefresh

    setting("ads", "restatement_days", 5)
    setting("daybreak", "start_date", DAY - dt.timedelta(days=30))
    ranges = list(MorningRefresh(today=DAY).requires())
    marked = [d for d in catalogue.DATASETS if d.refresh]
    assert sorted(r.of.entry.name for r in ranges) == sorted(d.name for d in marked)
    back = {"restated": DAY - dt.timedelta(days=5), "yesterday": DAY - dt.timedelta(days=1)}
    # the look-back starts where the window of its first date starts (not before start_date)
    first = {"ads_rolling_7d": DAY - dt.timedelta(days=11)}
    for r in ranges:
        assert (r.start, r.stop) == (first.get(r.of.entry.name, back[r.of.entry.refresh]), DAY), r.of.entry.name
    setting("daybreak", "start_date", DAY - dt.timedelta(days=8))
    starts = {r.of.entry.name: r.start for r in MorningRefresh(today=DAY).requires()}
    assert starts["ads_rolling_7d"] == DAY - dt.timedelta(days=8)


def test_status_shows_every_dataset_and_each_command_offers_each(lab, capsys):
    """``daybreak status`` has a line for every dataset, in catalogue order; plan, status and verify offer
    every dataset, preview every dataset of one partition per date."""
    from tasks.cli import build_parser, main

    assert main(["status", "--start", str(DAY), "--stop", str(DAY + dt.timedelta(days=1))]) == 0
    heads = [line.split("  ")[0] for line in capsys.readouterr().out.splitlines()[1:] if not line.startswith(" ")]
    assert [h for h in heads if h in catalogue.BY_NAME] == catalogue.names()
    for command, names in [
        ("plan", catalogue.names()),
        ("preview", catalogue.names("date")),
        ("status", catalogue.names()),
        ("verify", catalogue.names()),
    ]:
        with pytest.raises(SystemExit):
            build_parser().parse_args([command, "--help"])
        assert "{" + ",".join(names) + "}" in capsys.readouterr().out, command


def test_store_daily_sales_and_the_hotel_exports_have_status_lines(lab):
    from tasks.views import status

    start = dt.date(2026, 9, 1)
    lab.qsr_days(start, 2)
    assert lab.range(start, start + dt.timedelta(days=2)) == 0
    before = status.collect(start, start + dt.timedelta(days=2), ["store_daily_sales", "hotel_otb_export"])
    assert [(r.dataset, r.date, r.state) for r in before] == [
        ("store_daily_sales", None, "missing"),
        ("hotel_otb_export", None, "waiting"),  # no hotel extract: on-the-books waits for start_date's
    ]
    registers = "not registered yet: AllStores registers and builds it"  # the next AllStores builds them
    assert before[0].reason == f"store_id S001, S002: no partition, {registers}"
    assert (
        before[1].reason
        == "hotel H1, H2, H3, H4, H5: upstream staging/hotel_bookings_daily 2026-09-01 waits for raw data"
    )
    assert lab.luigi("AllStores") == 0
    (after,) = status.collect(start, start + dt.timedelta(days=2), ["store_daily_sales"])
    assert (after.state, after.reason) == ("ok", "") and after.rows == 4  # 2 stores x 2 business dates
    assert "store_daily_sales  (unpartitioned)  ok" in status.render_text([after])


def test_plan_covers_the_store_the_unpartitioned_and_the_per_hotel_datasets(lab, capsys):
    """plan for a store dataset lists each registered store that would run and the command that runs
    them; after that command, the plan has nothing to do. A staging date it would rebuild names the
    stores' output among what it makes stale."""
    from tasks.cli import main

    start, stop = dt.date(2026, 9, 1), dt.date(2026, 9, 3)
    lab.qsr_days(start, 2)
    assert lab.range(start, stop) == 0
    assert lab.luigi("AllStores") == 0
    capsys.readouterr()
    assert main(["plan", "store_daily_sales", "--start", str(start), "--stop", str(stop)]) == 0
    assert "store_daily_sales: 0 partitions would run" in capsys.readouterr().out
    rows = qsr_rows("S001", stop)
    lab.qsr_file(str(stop), "S001", [rows[0], *rows[2:]])  # re-sent without a line of business date 09-02
    assert main(["plan", "stg_qsr_pos", "--start", str(start), "--stop", str(stop)]) == 1
    out = capsys.readouterr().out
    assert "run   2026-09-02  stale: input content changed" in out
    assert "  then may go stale downstream: store_daily_sales S001\n" in out, out  # S001's file holds S001's rows
    assert lab.range(start, stop) == 0
    capsys.readouterr()
    assert main(["plan", "store_daily_sales", "--start", str(start), "--stop", str(stop)]) == 1
    out = capsys.readouterr().out
    assert "store_daily_sales: 1 partition would run" in out  # S002's slice of 09-02 is what it was
    assert "run   S001  stale: upstream staging/qsr_pos 2026-09-02 changed" in out
    assert "run:  luigi --module tasks AllStores --local-scheduler" in out
    assert lab.luigi("AllStores") == 0
    assert main(["plan", "store_daily_sales", "--start", str(start), "--stop", str(stop)]) == 0
    capsys.readouterr()
    assert main(["plan", "otb_by_stay_date", "--start", str(start), "--stop", str(stop)]) == 20  # only waits
    out = capsys.readouterr().out
    # no hotel extract yet: its range is start_date alone, and it waits for that folder (not empty books)
    assert "otb_by_stay_date: 0 partitions would run, 1 waits for raw data" in out
    assert "wait  (all)  upstream staging/hotel_bookings_daily 2026-09-01 waits for raw data" in out
    assert main(["plan", "hotel_pickup", "--start", str(start), "--stop", str(stop)]) == 20
    out = capsys.readouterr().out
    assert "hotel_pickup: 0 partitions would run, 10 wait for raw data" in out  # 2 dates x 5 hotels
    waits = "wait  2026-09-01 H1 .. 2026-09-02 H5 (10 partitions)"  # in a row with the same reason: one line
    assert f"{waits}  upstream staging/hotel_bookings_daily 2026-09-01 waits for raw data" in out
    extract = lab.raw / "hotel_bookings" / str(start) / "H1.csv"
    extract.parent.mkdir(parents=True)
    extract.write_text("booking_id,hotel_id,event_at,event,arrival_date,departure_date,rooms,rate,channel\n")
    assert main(["plan", "otb_by_stay_date", "--start", str(start), "--stop", str(stop)]) == 1
    out = capsys.readouterr().out
    assert "otb_by_stay_date: 1 partition would run" in out and "run   (all)  missing" in out
    assert "run:  luigi --module tasks OtbByStayDate --local-scheduler" in out


def test_plan_after_verify_found_a_store_file_changed_names_that_store_downstream_only(lab, capsys):
    """A store's file re-sent with the same size and time: only ``daybreak verify`` finds it; the plan then
    names that store's partition downstream, as for a re-send it sees itself, not every store's."""
    from tasks.cli import main

    start, stop = dt.date(2026, 9, 1), dt.date(2026, 9, 3)
    lab.qsr_days(start, 2, ("S001", "S002", "S003"))
    assert lab.range(start, stop) == 0
    assert lab.luigi("AllStores") == 0
    path = lab.raw / "qsr_pos" / str(stop) / "S002.csv"
    times, text = path.stat(), path.read_text()
    path.write_text(text.replace(",1,6.50,", ",2,6.50,", 1))  # one quantity: same size
    os.utime(path, ns=(times.st_atime_ns, times.st_mtime_ns))
    assert main(["verify", "--dataset", "stg_qsr_pos", "--start", str(start), "--stop", str(stop)]) == 1
    capsys.readouterr()
    assert main(["plan", "stg_qsr_pos", "--start", str(start), "--stop", str(stop)]) == 1
    out = capsys.readouterr().out
    assert f"qsr_pos/{stop}/S002.csv" in out, out
    assert "  then may go stale downstream: store_daily_sales S002\n" in out, out
