"""Tests for tasks/sample.py: the sample raw-zone generator follows the contract (raw-zone.md sections 1-4).

Expected values are worked out here independently (pandas / zoneinfo), not with the generator's helpers.
"""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pandas as pd
import pytest

from tasks import sample

pytestmark = pytest.mark.unit

TORONTO = ZoneInfo("America/Toronto")
START, DAYS, STORES, SEED, MEAN = date(2026, 9, 11), 3, 4, 7, 150  # Fri..Sun
QSR_HEADER = "order_id,line_no,store_id,ordered_at,sku,qty,unit_price,discount,status"
HOTEL_HEADER = "booking_id,hotel_id,event_at,event,arrival_date,departure_date,rooms,rate,channel"
ADS_HEADER = "date,campaign_id,channel,impressions,clicks,spend,conversions,conversion_value"
STORE_FILE = re.compile(r"^[A-Z0-9][A-Z0-9_-]{0,31}\.csv$")
WITH_OFFSET = r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(Z|[+-]\d\d:\d\d)$"
HOTELS = pd.read_csv(Path(__file__).resolve().parent.parent / "config" / "hotels.csv", dtype=str)


def _days(first: date, count: int) -> list[date]:
    return [first + timedelta(days=i) for i in range(count)]


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _read(root: Path, source: str) -> pd.DataFrame:
    """All files of a source, as strings, with their folder date and file stem."""
    frames = []
    for path in sorted((root / source).glob("*/*.csv")):
        df = pd.read_csv(path, dtype=str, keep_default_na=False)
        frames.append(df.assign(folder=date.fromisoformat(path.parent.name), stem=path.stem))
    return pd.concat(frames, ignore_index=True)


def _generate(root: Path, **kw) -> dict:
    args = {"start": START, "days": DAYS, "stores": STORES, "seed": SEED, "mean_lines_per_store": MEAN} | kw
    return sample.generate(root, **args)


@pytest.fixture(scope="module")
def zone(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("zone")
    _generate(root, include_late=True)
    return root


@pytest.fixture(scope="module")
def qsr(zone) -> pd.DataFrame:
    return _read(zone, "qsr_pos")


@pytest.fixture(scope="module")
def dst_zone(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("dst")
    _generate(root, start=date(2026, 10, 30), days=4, stores=3, mean_lines_per_store=400, include_late=True)
    return root


def test_same_arguments_give_identical_bytes(zone, tmp_path):
    summary = _generate(tmp_path, include_late=True)
    assert _files(tmp_path) == _files(zone)
    assert summary["qsr_files"] == STORES * (DAYS + 1) and summary["late_file_written"] is True
    assert _generate(tmp_path, include_late=True)["late_file_written"] is False  # there already: left alone
    assert summary["hotel_files"] == len(HOTELS) * DAYS and summary["ads_files"] == DAYS
    other = tmp_path / "other"
    _generate(other, seed=SEED + 1, include_late=True)
    assert _files(other)["qsr_pos/2026-09-12/S001.csv"] != _files(zone)["qsr_pos/2026-09-12/S001.csv"]


def test_late_file_is_held_back_and_reproduced_exactly(zone, tmp_path):
    rel = sample.late_file_relpath(START, DAYS, STORES, SEED)
    folder, name = re.fullmatch(r"qsr_pos/(\d{4}-\d\d-\d\d)/(S\d{3}\.csv)", rel).groups()
    assert START < date.fromisoformat(folder) < START + timedelta(days=DAYS)
    assert _generate(tmp_path)["late_file"] == rel
    assert not (tmp_path / rel).exists()
    expected = _files(zone)
    assert _files(tmp_path) == {k: v for k, v in expected.items() if k != rel}
    written = sample.write_late_file(tmp_path, START, DAYS, stores=STORES, seed=SEED, mean_lines_per_store=MEAN)
    assert written == tmp_path / rel
    assert written.read_bytes() == expected[rel]
    alone = tmp_path / "alone"  # the late file written into an empty raw zone is the same too
    assert sample.write_late_file(alone, START, DAYS, STORES, SEED, MEAN).read_bytes() == expected[rel]
    assert _files(alone).keys() == {rel}


def test_headers_and_line_endings(zone):
    headers = {"qsr_pos": QSR_HEADER, "hotel_bookings": HOTEL_HEADER, "ads": ADS_HEADER}
    for rel, data in _files(zone).items():
        text = data.decode("utf-8")
        assert text.split("\n", 1)[0] == headers[rel.split("/")[0]], rel
        assert "\r" not in text and '"' not in text and text.endswith("\n"), rel


def test_qsr_layout(zone, qsr):
    folders = sorted(p.name for p in (zone / "qsr_pos").iterdir())
    assert folders == [d.isoformat() for d in _days(START, DAYS + 1)]
    for folder in folders:
        names = sorted(p.name for p in (zone / "qsr_pos" / folder).iterdir())
        assert names == ["S001.csv", "S002.csv", "S003.csv", "S004.csv"]
        assert all(STORE_FILE.match(n) for n in names)
    assert (qsr["store_id"] == qsr["stem"]).all()


def _valid(df: pd.DataFrame) -> pd.Series:
    """Rows that satisfy the contract's column types."""
    return (
        df["order_id"].str.match(r"^S\d{3}-\d{8}-\d{5}$")
        & df["line_no"].str.match(r"^[1-9]\d*$")
        & df["ordered_at"].str.match(WITH_OFFSET)
        & df["qty"].str.match(r"^[1-9]\d*$")
        & df["unit_price"].str.match(r"^\d+\.\d\d$")
        & df["discount"].str.match(r"^(\d+\.\d\d)?$")
        & df["status"].isin(["COMPLETED", "VOIDED", "REFUNDED"])
    )


def test_qsr_folder_is_local_wall_date_and_business_days_complete(qsr):
    rows = qsr[qsr["ordered_at"].str.match(WITH_OFFSET)]
    local = pd.to_datetime(rows["ordered_at"], utc=True, format="ISO8601").dt.tz_convert("America/Toronto")
    assert (local.dt.date == rows["folder"]).all()
    business = (local.dt.tz_localize(None) - pd.Timedelta(hours=5)).dt.date
    assert set(business) == set(_days(START, DAYS))
    assert (business[rows["folder"] == START + timedelta(days=DAYS)] == START + timedelta(days=DAYS - 1)).all()
    late_night = business != rows["folder"]
    assert late_night.any() and (local[late_night].dt.hour < 5).all()
    assert (local.dt.hour.between(11, 13).mean()) > 0.25  # lunch peak
    assert rows["ordered_at"].str.endswith("Z").any()


def test_qsr_values(qsr):
    valid = _valid(qsr)
    assert valid.mean() > 0.98
    for _, share in (~valid).groupby([qsr["folder"], qsr["stem"]]).mean().items():
        assert share < 0.05
    ok = qsr[valid]
    assert (
        ok.groupby(["store_id", "order_id"])["line_no"]
        .apply(lambda s: set(s.astype(int)) == set(range(1, 1 + s.astype(int).max())))
        .all()
    )
    assert 20 <= ok["sku"].nunique() <= 40
    assert (ok.groupby("sku")["unit_price"].nunique() == 1).all()
    assert set(ok["status"]) == {"COMPLETED", "VOIDED", "REFUNDED"}
    assert (ok["status"] == "COMPLETED").mean() > 0.9


def test_qsr_dirt_in_a_bigger_day(tmp_path):
    sample.generate(tmp_path, date(2026, 9, 5), 2, stores=2, seed=3, mean_lines_per_store=5000)
    df = _read(tmp_path, "qsr_pos")
    cols = QSR_HEADER.split(",")
    assert df.duplicated(cols).any()
    resent = df[df.duplicated(["store_id", "order_id", "line_no"], keep=False) & ~df.duplicated(cols, keep=False)]
    assert (resent["status"] == "VOIDED").any()
    invalid = df[~_valid(df)]
    assert 0 < len(invalid) < 0.005 * len(df)
    assert {"abc", "PENDING", ""} & (set(invalid["qty"]) | set(invalid["status"]) | set(invalid["order_id"]))
    qty = pd.to_numeric(df["qty"], errors="coerce")
    assert (qty > 20).any() and (qty > 20).mean() < 0.005 and qty.between(1, 3).mean() > 0.95
    assert 0.005 < (df["status"] == "VOIDED").mean() < 0.05 and 0.002 < (df["status"] == "REFUNDED").mean() < 0.03


def test_dst_change_has_both_offsets_right_for_their_instants(dst_zone):
    df = _read(dst_zone, "qsr_pos")
    rows = df[df["ordered_at"].str.match(r"^.{19}[+-]\d\d:\d\d$")]
    assert set(rows["ordered_at"].str[-6:]) == {"-04:00", "-05:00"}
    for text in rows["ordered_at"]:
        stamp = datetime.fromisoformat(text)
        assert stamp.utcoffset() == stamp.astimezone(TORONTO).utcoffset(), text
    local = pd.to_datetime(rows["ordered_at"], utc=True, format="ISO8601").dt.tz_convert("America/Toronto")
    assert (local.dt.date == rows["folder"]).all()


def test_ads_exports_hold_the_seven_days_before(tmp_path):
    start, days = date(2026, 9, 1), 10
    sample.generate(tmp_path, start, days, stores=1, seed=SEED, mean_lines_per_store=10)
    ads = _read(tmp_path, "ads")
    assert sorted(set(ads["folder"])) == _days(start + timedelta(days=1), days)
    for export, rows in ads.groupby("folder"):
        expected = {export - timedelta(days=k) for k in range(1, 8)} & set(_days(start, days))
        assert set(rows["date"].map(date.fromisoformat)) == expected
        assert not rows.duplicated(["date", "campaign_id"]).any()
    assert ads["campaign_id"].nunique() >= 6 and set(ads["channel"]) >= {"google", "meta"}
    ads = ads.sort_values(["date", "campaign_id", "folder"])
    for _, hist in ads.groupby(["date", "campaign_id"]):
        assert hist[["impressions", "clicks", "spend"]].nunique().max() == 1
        assert hist["conversions"].astype(int).is_monotonic_increasing
        assert hist["conversion_value"].astype(float).is_monotonic_increasing
    restated = ads.groupby(["date", "campaign_id"])["conversions"].nunique()
    assert (restated > 1).any()
    assert (ads["spend"].astype(float) == 0).any()


def test_hotel_events_are_in_their_local_date_folder(zone):
    df = _read(zone, "hotel_bookings")
    assert sorted(set(df["folder"])) == _days(START, DAYS)
    assert (df["hotel_id"] == df["stem"]).all() and set(df["stem"]) == set(HOTELS["hotel_id"])
    timezone = dict(zip(HOTELS["hotel_id"], HOTELS["timezone"], strict=True))
    for text, hotel, folder in zip(df["event_at"], df["hotel_id"], df["folder"], strict=True):
        stamp = datetime.fromisoformat(text)
        assert stamp.utcoffset() is not None and stamp.astimezone(ZoneInfo(timezone[hotel])).date() == folder, text
    assert df.groupby(["folder", "hotel_id"]).size().between(20, 60).all()
    assert set(df["event"]) == {"CREATED", "MODIFIED", "CANCELLED"}
    assert (pd.to_datetime(df["departure_date"]) > pd.to_datetime(df["arrival_date"])).all()
    created = df[df["event"] == "CREATED"]
    assert created["booking_id"].is_unique
    first = created.set_index("booking_id")["folder"]
    later = df[df["event"] != "CREATED"]
    assert (later["booking_id"].map(first) < later["folder"]).all()
    clock = df["event_at"].str[11:16]
    assert clock.isin(["00:00", "23:59"]).sum() >= 3
    assert (df["rooms"].astype(int) >= 1).all() and df["rate"].str.match(r"^\d+\.\d\d$").all()


def test_a_file_already_there_is_never_written_over(tmp_path):
    """Generating again with the same arguments leaves every file alone, its mtime too, and writes the missing
    ones; a file there with other bytes is refused, writing nothing (before, any file there was refused: the
    README's own sample line failed when run twice)."""
    _generate(tmp_path)
    stamps = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*.csv")}
    missing = tmp_path / "ads" / (START + timedelta(days=DAYS)).isoformat() / "ads.csv"
    missing.unlink()
    summary = _generate(tmp_path)  # the same arguments
    assert summary["files_unchanged"] == len(stamps) - 1 and missing.is_file()
    assert {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*.csv") if p != missing} == {
        p: t for p, t in stamps.items() if p != missing
    }
    edited = tmp_path / "qsr_pos/2026-09-12/S001.csv"
    edited.write_bytes(edited.read_bytes() + b"S001-X,1,S001,2026-09-12T12:00:00-04:00,COLA,1,1.99,,COMPLETED\n")
    missing.unlink()
    before = _files(tmp_path)
    with pytest.raises(sample.SampleExists) as refused:
        _generate(tmp_path)
    assert _files(tmp_path) == before  # the edit stays, and the missing file is not written either
    assert str(refused.value).startswith(f"{edited} exists with other bytes than this sample's")
    assert refused.value.relpaths == ["qsr_pos/2026-09-12/S001.csv"]
    with pytest.raises(sample.SampleExists):  # another seed: every file differs
        _generate(tmp_path, seed=SEED + 1)
    assert _files(tmp_path) == before
    # the late file: written, then left alone, and refused once it differs
    late = sample.write_late_file(tmp_path, START, DAYS, STORES, SEED, MEAN)
    assert late.relative_to(tmp_path).as_posix() not in before
    stamp = late.stat().st_mtime_ns
    assert (
        sample.write_late_file(tmp_path, START, DAYS, STORES, SEED, MEAN) == late and late.stat().st_mtime_ns == stamp
    )
    late.write_bytes(b"other")
    with pytest.raises(sample.SampleExists):
        sample.write_late_file(tmp_path, START, DAYS, STORES, SEED, MEAN)
    assert late.read_bytes() == b"other"


def test_planned_files_are_the_files_written(tmp_path):
    _generate(tmp_path, include_late=True)
    assert sorted(sample.planned_files(START, DAYS, STORES)) == sorted(_files(tmp_path))
