"""ExperimentSpec's ``aws`` and ``ray`` mappings: their keys and types come from AwsSettings and RaySettings; every
refusal of a spec field is one ConfigError line, never a pydantic ValidationError."""

from __future__ import annotations

import dataclasses
from fractions import Fraction

import numpy as np
import pytest
from pydantic import ValidationError

from spottune.backends.aws._settings import AwsSettings
from spottune.backends.ray._settings import RaySettings
from spottune.errors import ConfigError
from spottune.experiment import AWS_KEYS, RAY_KEYS, AwsOptions, ExperimentSpec, RayOptions


def test_the_allowed_keys_are_the_option_fields_the_settings_extend():
    assert AWS_KEYS == ("bucket", "image", "ami", "instance_profile", "region", "experiment", "subnets",
                        "security_groups", "prefix", "endpoint_url", "live_prices", "lease_s", "lease_save_s",
                        "linger_s", "exclusion_s", "describe_every_s", "report_timeout_s")
    assert RAY_KEYS == ("address", "prices", "imds_url", "poll_s", "watch_s", "notice_s", "lost_after_s", "num_cpus",
                        "log_to_driver", "lease_s", "place_s")
    assert issubclass(AwsSettings, AwsOptions) and issubclass(RaySettings, RayOptions)
    aws = {f.name: f for f in dataclasses.fields(AwsSettings)}
    assert set(AWS_KEYS) < set(aws) and "store_url" not in AWS_KEYS and "poll_s" not in AWS_KEYS
    assert set(RAY_KEYS) < {f.name for f in dataclasses.fields(RaySettings)}
    settings = AwsSettings(experiment="e", bucket="b", store_url="s3://b/c")  # the options' defaults
    assert (settings.region, settings.lease_s, settings.security_groups, settings.live_prices) == (
        "us-east-1", 600.0, (), True)
    with pytest.raises(ConfigError, match=r"^aws is \{'store_url': 's3://b'\}, but must be a mapping with keys among "
                                          r"bucket, image, .*, describe_every_s, report_timeout_s$"):
        ExperimentSpec(aws={"store_url": "s3://b"})


def test_every_key_with_a_value_of_its_type_is_accepted_as_given():
    aws = {"experiment": 2024, "bucket": "b", "image": "i", "ami": "a", "instance_profile": "p", "region": "r",
           "prefix": "p", "endpoint_url": None, "subnets": {"us-east-1a": "subnet-1"}, "security_groups": ["sg-1"],
           "describe_every_s": 15, "lease_s": 600.0, "lease_save_s": 60, "linger_s": 600, "exclusion_s": 1800,
           "live_prices": False, "report_timeout_s": 600}
    ray = {"address": "ray://h:10001", "prices": {"m5.large/us-east-1a": 0.035}, "imds_url": "none", "poll_s": 5,
           "watch_s": 1.0, "notice_s": 120, "lost_after_s": 60, "num_cpus": 0, "log_to_driver": True,
           "lease_s": 900.0, "place_s": 300.0}
    assert set(aws) == set(AWS_KEYS) and set(ray) == set(RAY_KEYS)
    spec = ExperimentSpec(aws=aws, ray=ray)
    assert spec.aws == aws and spec.ray == ray and ExperimentSpec.from_dict(spec.to_dict()) == spec
    assert type(spec.aws["lease_save_s"]) is int  # checked, not converted


@pytest.mark.parametrize("kwargs, message", [
    ({"aws": {"lease_s": "600"}}, "aws.lease_s is '600', but must be a finite number"),
    ({"aws": {"lease_s": float("inf")}}, "aws.lease_s is inf, but must be a finite number"),
    ({"aws": {"live_prices": "no"}}, "aws.live_prices is 'no', but must be true or false"),
    ({"aws": {"bucket": True}}, "aws.bucket is True, but must be a string"),
    ({"aws": {"endpoint_url": 1.5}}, "aws.endpoint_url is 1.5, but must be a string or None"),
    ({"aws": {"subnets": ["subnet-1"]}}, "aws.subnets is ['subnet-1'], but must be a mapping of strings to strings"),
    ({"aws": {"security_groups": "sg-1"}}, "aws.security_groups is 'sg-1', but must be a list of strings"),
    ({"ray": {"poll_s": True}}, "ray.poll_s is True, but must be a finite number"),
    ({"ray": {"log_to_driver": 1}}, "ray.log_to_driver is 1, but must be true or false"),
    ({"ray": {"address": ""}}, "ray.address is '', but must be 'auto', HOST:PORT or ray://HOST:PORT"),
    ({"ray": {"prices": {"m5.large/us-east-1a": Fraction(1, 2)}}},
     "ray.prices is {'m5.large/us-east-1a': Fraction(1, 2)}, but must be a mapping '<instance type>/<zone>' -> USD "
     "per instance-hour >= 0"),
    # the keys of a mapping before its values; the first failing field of the spec
    ({"ray": {"bogus": 1, "address": ""}}, "ray is {'bogus': 1, 'address': ''}, but must be a mapping with keys "
                                           "among address, prices, imds_url, poll_s, watch_s, notice_s, lost_after_s, "
                                           "num_cpus, log_to_driver, lease_s, place_s"),
    ({"aws": {"lease_s": "x"}, "ray": {"bogus": 1}}, "aws.lease_s is 'x', but must be a finite number"),
    ({"theta": 2, "aws": {"lease_s": "x"}}, "theta is 2.0, but must be 0 < theta <= 1"),
])
def test_a_bad_option_value_is_one_line_naming_key_value_and_type(kwargs, message):
    with pytest.raises(ConfigError) as exc:
        ExperimentSpec(**kwargs)
    assert str(exc.value) == message


@pytest.mark.parametrize("value", [None, True, "x", "", [], {}, {1: 2}, -1, 0.5, float("nan"), np.int64(3),
                                   np.float32(0.5), Fraction(1, 2), 10**30, "memory://x", [[0.06, 6]]])
def test_no_field_value_escapes_as_a_validation_error(value):
    names = [f.name for f in dataclasses.fields(ExperimentSpec) if f.init and f.name != "workload"]
    for name in names:
        try:
            ExperimentSpec(**{name: value})
        except ConfigError as exc:
            assert not isinstance(exc, ValidationError) and "\n" not in str(exc), (name, value, exc)
            assert exc.__cause__ is None and "pydantic" not in str(exc), (name, value, exc)
