"""labkit.instruments.energy: RAPL counters read (and their wrap-around) from a fake powercap tree, the estimate
labelled as one, and the estimate card's kWh and dollars."""

import time

import pytest

from labkit.instruments import energy
from labkit.predict import estimate


def _zone(root, name, label, energy_uj, wrap=1_000_000):
    zone = root / name
    zone.mkdir()
    (zone / "name").write_text(f"{label}\n")
    (zone / "energy_uj").write_text(f"{energy_uj}\n")
    (zone / "max_energy_range_uj").write_text(f"{wrap}\n")
    return zone / "energy_uj"


def test_rapl_counters_add_dram_and_skip_the_package_parts_psys_and_unreadable_zones(tmp_path):
    _zone(tmp_path, "intel-rapl:0", "package-0", 5)
    _zone(tmp_path, "intel-rapl:0:0", "core", 3)  # inside the package
    _zone(tmp_path, "intel-rapl:0:1", "dram", 2, wrap=2_000_000)  # the memory modules: outside it
    _zone(tmp_path, "intel-rapl:1", "psys", 9)  # the whole platform, the package included
    (tmp_path / "intel-rapl:2").mkdir()  # no files: not readable
    found = energy.rapl_counters(tmp_path)
    assert list(found) == ["package-0", "package-0 dram"]
    assert found["package-0"] == (tmp_path / "intel-rapl:0" / "energy_uj", 1_000_000)
    assert found["package-0 dram"] == (tmp_path / "intel-rapl:0:1" / "energy_uj", 2_000_000)
    assert energy.rapl_counters(tmp_path / "missing") == {}


def _advance(counter, uj):
    counter.write_text(str(int(counter.read_text()) + uj))


def test_the_energy_is_the_packages_plus_their_dram_and_the_source_says_so(tmp_path):
    packages = [_zone(tmp_path, f"intel-rapl:{i}", f"package-{i}", 0, wrap=10**12) for i in (0, 1)]
    drams = [_zone(tmp_path, f"intel-rapl:{i}:0", "dram", 0, wrap=10**12) for i in (0, 1)]
    _zone(tmp_path, "intel-rapl:0:1", "core", 0, wrap=10**12)
    core = tmp_path / "intel-rapl:0:1" / "energy_uj"

    # each call: 3 mJ and 5 mJ in the packages, 1 mJ and 2 mJ in their DRAM, 7 mJ in package 0's cores (counted in it)
    moving = list(zip(packages + drams + [core], (3_000, 5_000, 1_000, 2_000, 7_000), strict=True))

    def work():
        for counter, uj in moving:
            _advance(counter, uj)
        time.sleep(0.004)

    record = energy.measure_energy(work, min_run_s=0.02, rapl_root=tmp_path)
    # exact, in µJ: 3 + 5 + 1 + 2 mJ a call (the warm-up call moved the counters too, and is not counted)
    assert int(packages[0].read_text()) == 3_000 * (record.calls + 1)
    assert record.joules * 1e6 == pytest.approx(record.calls * 11_000, abs=1e-6)
    counted = "package-0, package-0 dram, package-1, package-1 dram"
    assert record.source == f"RAPL counters {counted} (2 whole packages and DRAM)"
    for name in ("intel-rapl:0:0", "intel-rapl:1:0"):  # without DRAM counters the figure says what it leaves out
        for f in (tmp_path / name).iterdir():
            f.unlink()
        (tmp_path / name).rmdir()
    moving = [m for m in moving if m[0] not in drams]
    record = energy.measure_energy(work, min_run_s=0.02, rapl_root=tmp_path)
    assert record.joules * 1e6 == pytest.approx(record.calls * 8_000, abs=1e-6)
    assert record.source.endswith("(2 whole packages, without DRAM: this machine exposes no DRAM counter)")


def test_a_counter_is_read_before_and_after_and_its_wrap_is_undone(tmp_path):
    counter = _zone(tmp_path, "intel-rapl:0", "package-0", 985_000)

    def work():  # each call "uses" 10 mJ: the counter advances 10,000 µJ and wraps at 1,000,000 during the run
        counter.write_text(str((int(counter.read_text()) + 10_000) % 1_000_000))
        time.sleep(0.004)

    record = energy.measure_energy(work, min_run_s=0.02, rapl_root=tmp_path)
    assert record.measured and "package-0" in record.source
    assert int(counter.read_text()) < 985_000 + 10_000  # it did wrap
    assert record.joules_per_call == pytest.approx(0.01)
    assert record.watts == pytest.approx(record.joules / record.seconds)


def test_without_a_counter_the_estimate_says_so_and_without_a_power_it_is_an_error(tmp_path):
    record = energy.measure_energy(lambda: None, assumed_watts=20.0, min_run_s=0.01, rapl_root=tmp_path)
    assert not record.measured and "20 W assumed" in record.source and "ESTIMATED" in str(record)
    assert record.watts == pytest.approx(20.0)
    with pytest.raises(ValueError, match="assumed_watts"):
        energy.measure_energy(lambda: None, min_run_s=0.01, rapl_root=tmp_path)
    with pytest.raises(ValueError, match="assumed_watts"):
        energy.measure_energy(lambda: None, assumed_watts=-1, rapl_root=tmp_path)


def test_the_card_prices_the_job_and_counts_its_energy():
    card = estimate.EstimateCard(
        "a job", seconds=7200, low_s=3600, high_s=10800, devices=8, watts=700, power_source="rated",
        price_per_hour=3.0, price_source="assumed",
    )  # fmt: skip
    assert card.energy_kwh == pytest.approx(8 * 700 * 2 / 1000)
    assert card.cost == pytest.approx(8 * 2 * 3.0)
    text = str(card)
    assert "11.2 kWh (8 x 700 W; rated)" in text and "$48.00 at $3 per device-hour (assumed)" in text
    assert estimate.EstimateCard("j", 1, 1, 1).energy_kwh is None
    with pytest.raises(ValueError, match="watts"):
        estimate.EstimateCard("j", 1, 1, 1, watts=0)
