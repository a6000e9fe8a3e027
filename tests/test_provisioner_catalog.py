"""Instance catalog: sources, precedence, public facts, and errors for missing entries."""

import pytest

from provisioner import PUBLIC_FACTS, CatalogError, InstanceCatalog, UnknownInstanceType, find_data_file

TRACE_2015_TYPES = ["c3.xlarge", "d2.8xlarge", "g2.2xlarge", "m3.medium", "r3.large"]
PAPER_TYPES = ["r4.large", "r3.xlarge", "r4.xlarge", "m4.2xlarge", "r4.2xlarge", "m4.4xlarge"]


@pytest.fixture(scope="module")
def catalog():
    return InstanceCatalog.load()


def test_covers_the_2015_trace_and_the_paper_pool(catalog):
    for it in TRACE_2015_TYPES + PAPER_TYPES:
        assert catalog[it].on_demand("us-east-1") > 0
    # 1,395 DescribeInstanceTypes types + the 2017 file's and PUBLIC_FACTS' types the snapshot lacks
    assert len(catalog) == 1411


def test_g2_2xlarge_comes_from_public_facts(catalog):
    g2 = catalog["g2.2xlarge"]
    assert (g2.vcpus, g2.memory_gib, g2.ecu, g2.gpus) == (8, 15.0, 26.0, 1)
    assert g2.on_demand("us-east-1") == 0.65
    assert "public AWS facts" in g2.source and "on_demand_us-east-1_2015.csv" in g2.source
    # the only 2015-trace type without specs in the files, and the P3 types the snapshot lacks
    assert set(PUBLIC_FACTS) == {"g2.2xlarge", "p3.2xlarge", "p3.8xlarge", "p3.16xlarge"}


def test_regional_2015_file_wins_over_noahgift(catalog):
    assert catalog["m3.medium"].on_demand("us-east-1") == 0.067  # noahgift: 0.07
    assert catalog["r3.large"].on_demand("us-east-1") == 0.175  # noahgift: 0.17
    assert catalog["r3.large"].vcpus == 2 and catalog["r3.large"].memory_gib == 15.25
    assert catalog.on_demand_usd_per_hour("r4.large", "us-east-1") == 0.13  # noahgift only


def test_paper_table_iii_facts(catalog):
    m4 = catalog["m4.4xlarge"]
    assert (m4.vcpus, m4.memory_gib, m4.on_demand("us-east-1")) == (16, 64.0, 0.8)


def test_missing_type_is_an_error_not_a_default(catalog):
    with pytest.raises(UnknownInstanceType, match=r"'c5.lrge' is not in the catalog; did you mean c5.large"):
        catalog["c5.lrge"]
    with pytest.raises(KeyError):  # still a KeyError for generic handlers
        catalog["p9.huge"]
    assert "c5.lrge" not in catalog


def test_missing_region_or_na_price_is_an_error(catalog):
    with pytest.raises(UnknownInstanceType, match="no on-demand price in region ap-south-1"):
        catalog["r4.large"].on_demand("ap-south-1")
    with pytest.raises(UnknownInstanceType, match="known regions: none"):
        catalog["f1.2xlarge"].on_demand("us-east-1")  # N/A in the file


def test_spec_is_frozen(catalog):
    spec = catalog["r3.large"]
    with pytest.raises(AttributeError):
        spec.vcpus = 3
    with pytest.raises(TypeError):
        spec.on_demand_usd_per_hour["us-east-1"] = 0.0
    hash(spec)


def test_explicit_paths(tmp_path):
    specs = tmp_path / "specs.csv"
    specs.write_text(
        "Name,InstanceType,memory_gb,compute_units_ecu,vcpu,gpus,fpga,enhanced_networking,linux_on_demand_cost_hourly\n"
        "X,x1.small,2,Variable,1,0,0,No,0.01\n"
    )
    prices = tmp_path / "prices.csv"
    prices.write_text("instance_type,region,os,on_demand_price_usd_per_hour\nx1.small,eu-west-1,Linux,0.02\n")
    cat = InstanceCatalog.load(specs_path=specs, regional_prices_path=prices, public_facts={})
    x = cat["x1.small"]
    assert x.ecu is None and x.vcpus == 1
    assert dict(x.on_demand_usd_per_hour) == {"us-east-1": 0.01, "eu-west-1": 0.02}


def test_priced_type_without_facts_is_an_error(tmp_path):
    specs = tmp_path / "specs.csv"
    specs.write_text("InstanceType,memory_gb,compute_units_ecu,vcpu,gpus,linux_on_demand_cost_hourly\n")
    prices = tmp_path / "prices.csv"
    prices.write_text("instance_type,region,os,on_demand_price_usd_per_hour\nzz.large,us-east-1,Linux,0.1\n")
    with pytest.raises(CatalogError, match="zz.large.*no vCPU/memory facts"):
        InstanceCatalog.load(specs_path=specs, regional_prices_path=prices, public_facts={})


def test_bad_files(tmp_path):
    with pytest.raises(CatalogError, match="cannot read"):
        InstanceCatalog.load(specs_path=tmp_path / "nope.csv", regional_prices_path=tmp_path / "nope2.csv")
    bad = tmp_path / "bad.csv"
    bad.write_text("InstanceType,memory_gb,compute_units_ecu,vcpu,gpus,linux_on_demand_cost_hourly\nq.large,lots,1,2,0,0.1\n")
    with pytest.raises(CatalogError, match="bad.csv:2: column memory_gb"):
        InstanceCatalog.load(specs_path=bad, data_dir=find_data_file("on_demand_us-east-1_2015.csv").parent)
    with pytest.raises(CatalogError, match="not found in any of"):
        find_data_file("on_demand_us-east-1_2015.csv", data_dir=tmp_path)


def test_default_lookup_follows_the_price_data_order(tmp_path, monkeypatch):
    (tmp_path / "extra_on_demand.csv").write_text("x\n")
    monkeypatch.setenv("SPOTTUNE_DATA", str(tmp_path))
    assert find_data_file("extra_on_demand.csv") == tmp_path / "extra_on_demand.csv"
    assert find_data_file("on_demand_2017_noahgift.csv").name == "on_demand_2017_noahgift.csv"


def test_current_types_come_from_describe_instance_types(catalog):
    """The docs' example pool and the GPU families: facts from the bundled DescribeInstanceTypes snapshot."""
    c5 = catalog["c5.large"]
    assert (c5.vcpus, c5.memory_gib, c5.ecu, c5.gpus, c5.architectures) == (2, 4.0, None, 0, ("x86_64",))
    assert c5.network == "Up to 10 Gigabit" and c5.on_demand("us-east-1") == 0.085
    g4 = catalog["g4dn.xlarge"]
    assert (g4.vcpus, g4.memory_gib, g4.gpus, g4.gpu_memory_gib, g4.gpu_model) == (4, 16.0, 1, 16.0, "T4")
    assert g4.on_demand("us-east-1") == 0.526
    assert "DescribeInstanceTypes" in g4.source and "on_demand_us-east-1_current.csv" in g4.source
    p5 = catalog["p5.48xlarge"]
    assert (p5.vcpus, p5.gpus, p5.gpu_memory_gib, p5.gpu_model) == (192, 8, 640.0, "H100")
    assert dict(p5.on_demand_usd_per_hour) == {}  # not in the bundled table: Price List API or --on-demand-prices
    assert catalog["m7g.large"].architectures == ("arm64",)
    for t in ("c5", "c6i", "c7i", "m5", "m6i", "m7i", "r5", "r6i"):
        assert catalog[f"{t}.large"].on_demand("us-east-1") > 0 and catalog[f"{t}.large"].gpus == 0
    for t in ("g4dn.xlarge", "g5.xlarge", "g6.xlarge", "p3.2xlarge"):
        assert catalog[t].gpus == 1 and catalog[t].on_demand("us-east-1") > 0


def test_the_2017_file_keeps_its_facts_and_the_snapshot_adds_the_rest(catalog):
    r3 = catalog["r3.large"]
    assert (r3.vcpus, r3.memory_gib, r3.ecu) == (2, 15.25, 6.5)  # the snapshot says 15,360 MiB = 15.0 GiB
    assert r3.network == "Moderate" and r3.architectures == ("x86_64",)
    assert r3.source.startswith("specs: on_demand_2017_noahgift.csv + instance_types.csv")


def test_given_prices_win_over_the_bundled_ones(tmp_path):
    own = tmp_path / "mine.csv"
    own.write_text("instance_type,region,os,on_demand_price_usd_per_hour\nc5.large,us-east-1,Linux,0.09\n"
                   "g4dn.xlarge,eu-west-1,Linux,0.587\n")
    cat = InstanceCatalog.load(on_demand_files=[own], on_demand_prices={"us-east-1": {"g4dn.xlarge": 0.5}})
    assert cat["c5.large"].on_demand("us-east-1") == 0.09 and "mine.csv" in cat["c5.large"].source
    assert dict(cat["g4dn.xlarge"].on_demand_usd_per_hour) == {"us-east-1": 0.5, "eu-west-1": 0.587}
    assert "us-east-1 price: AWS Price List API" in cat["g4dn.xlarge"].source
    cat = InstanceCatalog.load(on_demand_files=[own], on_demand_prices={"us-east-1": {"c5.large": 0.08}})
    assert cat["c5.large"].on_demand("us-east-1") == 0.09  # the user's file wins over the API
    bad = tmp_path / "bad.csv"
    bad.write_text("instance_type,region,os,on_demand_price_usd_per_hour\nc5.large,us-east-1,Linux,0\n")
    with pytest.raises(CatalogError, match=r"bad.csv:2: .* must be > 0"):
        InstanceCatalog.load(on_demand_files=[bad])


def test_the_compact_table_is_derived_from_the_snapshot(tmp_path):
    """data/instance_types/instance_types.csv is what provisioner._instance_types makes of the bundled snapshot."""
    from provisioner._instance_types import main

    here = find_data_file("on_demand_2017_noahgift.csv").parents[1] / "instance_types"
    out = tmp_path / "it.csv"
    assert main([str(here / "instance_types.json.gz"), str(out)]) == 0
    assert out.read_bytes() == (here / "instance_types.csv").read_bytes()
    assert len(out.read_text().splitlines()) == 1 + 1395
