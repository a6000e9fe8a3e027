"""On-demand prices from the AWS Price List API (``pricing.get_products``), its cache, and the fallback.

moto 5.2.5 has no ``pricing`` service, so the client is a real botocore ``pricing`` client with a botocore
``Stubber``: the requests are checked against the service model, the answers are shaped as AWS's (``PriceList``
entries are JSON strings, the on-demand rate under ``terms.OnDemand.*.priceDimensions.*.pricePerUnit.USD``).
"""

from __future__ import annotations

import json

import boto3
import pytest
from botocore.stub import Stubber

from spottune.backends.aws._build import on_demand_from_api
from spottune.backends.aws._pricelist import get_on_demand_prices, parse_product
from spottune.compose import build_market
from spottune.experiment import ExperimentSpec

NOW = 1_795_000_000.0


def product(itype: str, usd: str, unit: str = "Hrs") -> str:
    """One PriceList entry as the API returns it (trimmed to the fields read)."""
    return json.dumps({
        "product": {"productFamily": "Compute Instance",
                    "attributes": {"instanceType": itype, "regionCode": "us-east-1", "operatingSystem": "Linux",
                                   "tenancy": "Shared", "preInstalledSw": "NA", "capacitystatus": "Used"}},
        "terms": {"OnDemand": {"SKU.JRTCKXETXF": {"priceDimensions": {"SKU.JRTCKXETXF.6YS6EN2CT7": {
            "unit": unit, "pricePerUnit": {"USD": usd}, "description": f"${usd} per On Demand Linux {itype} Instance Hour"}}}}},
    })


def request(itype: str, region: str = "us-east-1") -> dict:
    fixed = {"instanceType": itype, "regionCode": region, "operatingSystem": "Linux", "tenancy": "Shared",
             "preInstalledSw": "NA", "capacitystatus": "Used"}
    return {"ServiceCode": "AmazonEC2", "Filters": [{"Type": "TERM_MATCH", "Field": k, "Value": v} for k, v in fixed.items()]}


@pytest.fixture
def pricing(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    client = boto3.client("pricing", region_name="us-east-1")
    with Stubber(client) as stub:
        yield client, stub
        stub.assert_no_pending_responses()


def test_parse_product_reads_the_hourly_usd_rate():
    assert parse_product(product("g4dn.xlarge", "0.5260000000")) == ("g4dn.xlarge", 0.526)
    assert parse_product(product("g4dn.xlarge", "0.0000000000")) is None  # a zero rate is no price
    assert parse_product(product("g4dn.xlarge", "1.0", unit="Quantity")) is None


def test_prices_are_asked_once_then_read_from_the_cache(pricing, tmp_path):
    client, stub = pricing
    cache = tmp_path / "prices.json"
    stub.add_response("get_products", {"PriceList": [product("c5.large", "0.0850000000")], "FormatVersion": "aws_v1"},
                      request("c5.large"))
    stub.add_response("get_products", {"PriceList": [], "FormatVersion": "aws_v1"}, request("zz.large"))
    got = get_on_demand_prices(["c5.large", "zz.large"], "us-east-1", pricing=client, cache_path=cache, now_s=NOW)
    assert got == {"c5.large": 0.085}  # a type the API does not price is left out
    stored = json.loads(cache.read_text())
    assert stored["us-east-1/c5.large"] == {"usd_per_hour": 0.085, "fetched_s": NOW, "source": "pricing.get_products"}
    assert stored["us-east-1/zz.large"]["usd_per_hour"] is None
    # a day later: both from the cache, no call (the stubber has no response left: a call would fail)
    assert get_on_demand_prices(["c5.large", "zz.large"], "us-east-1", pricing=client, cache_path=cache,
                                now_s=NOW + 86400) == {"c5.large": 0.085}
    # eight days later (cache: 7 days): asked again
    stub.add_response("get_products", {"PriceList": [product("c5.large", "0.0900000000")], "FormatVersion": "aws_v1"},
                      request("c5.large"))
    assert get_on_demand_prices(["c5.large"], "us-east-1", pricing=client, cache_path=cache,
                                now_s=NOW + 8 * 86400) == {"c5.large": 0.09}


def test_a_live_run_prices_its_pool_from_the_api_and_the_catalog_uses_them(pricing, tmp_path):
    client, stub = pricing
    stub.add_response("get_products", {"PriceList": [product("g4dn.xlarge", "0.5000000000")], "FormatVersion": "aws_v1"},
                      request("g4dn.xlarge"))
    spec = ExperimentSpec(backend="aws", instance_types=["g4dn.xlarge"], aws={"bucket": "b", "region": "us-east-1"})
    api = on_demand_from_api(spec, pricing=client, cache_path=tmp_path / "p.json")
    assert api == {"us-east-1": {"g4dn.xlarge": 0.5}}
    from provisioner import InstanceCatalog

    cat = InstanceCatalog.load(on_demand_prices=api)
    assert cat["g4dn.xlarge"].on_demand("us-east-1") == 0.5  # over the bundled 0.526
    assert "us-east-1 price: AWS Price List API" in cat["g4dn.xlarge"].source


def test_a_refusal_falls_back_to_the_bundled_prices_with_one_warning(pricing, tmp_path):
    client, stub = pricing
    stub.add_client_error("get_products", service_error_code="AccessDeniedException",
                          service_message="not authorized to perform: pricing:GetProducts", http_status_code=400)
    spec = ExperimentSpec(backend="aws", instance_types=["c5.large"], aws={"bucket": "b"})
    lines = []
    assert on_demand_from_api(spec, pricing=client, cache_path=tmp_path / "p.json", log_fn=lines.append) is None
    assert lines == ["warning: AWS Price List API not asked (An error occurred (AccessDeniedException) "
                     "when calling the GetProducts operation: not authorized to perform: pricing:GetProducts); "
                     "on-demand prices come from the bundled tables and --on-demand-prices"]


def test_a_test_endpoint_asks_no_price_list_api(tmp_path):
    spec = ExperimentSpec(backend="aws", instance_types=["c5.large"], aws={"bucket": "b", "endpoint_url": "http://127.0.0.1:9"})
    assert on_demand_from_api(spec, pricing=object(), cache_path=tmp_path / "p.json") is None  # object(): never called
