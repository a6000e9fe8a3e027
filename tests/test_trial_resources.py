"""What a trial needs (cpu, gpu, memory_gib): the declaration, the pool it leaves, and the GPU speed prior."""

from __future__ import annotations

import logging

import pandas as pd
import pytest

from provisioner import InstanceCatalog, NoMarketAvailable, PerformanceMatrix, Pool, PooledSpeedMatrix, ProvisionerConfigError
from spotmarket.prices import PriceHistory
from spottune.errors import ConfigError
from spottune.experiment import ExperimentSpec
from spottune.speed import seconds_per_step
from spottune.trainable import parse_resources

TYPES = ["c5.large", "m5.large", "c5.xlarge", "g4dn.xlarge", "g4dn.12xlarge", "g5.xlarge"]


@pytest.fixture(scope="module")
def catalog():
    return InstanceCatalog.load()


@pytest.fixture(scope="module")
def history():
    t = pd.Timestamp("2026-11-01T00:00Z")
    rows = [(t + pd.Timedelta(hours=h), it, 0.05) for h in (0, 24) for it in TYPES]
    return PriceHistory(pd.DataFrame({"timestamp": [r[0] for r in rows], "availability_zone": "us-east-1a",
                                      "instance_type": [r[1] for r in rows], "product_description": "Linux/UNIX",
                                      "price": [r[2] for r in rows]}))


def test_parse_resources_takes_ray_names_and_refuses_the_rest():
    assert parse_resources({"GPU": 1, "cpu": 4, "memory_gib": 16}) == {"cpu": 4.0, "gpu": 1.0, "memory_gib": 16.0}
    assert parse_resources(None) == {} and parse_resources({}) == {}
    with pytest.raises(ConfigError, match=r"^resources has key 'memory', .*say memory_gib \(GiB; Ray's memory is in bytes\)$"):
        parse_resources({"memory": 2**30})
    with pytest.raises(ConfigError, match=r"^resources.gpu is -1, but must be a finite number >= 0$"):
        parse_resources({"gpu": -1})
    with pytest.raises(ConfigError, match=r"^resources is \[1\], but must be a mapping with keys among cpu, gpu, memory_gib$"):
        parse_resources([1])


def test_the_spec_takes_the_trainables_declaration_unless_it_gives_its_own():
    class GpuNet(__import__("spottune").Trainable):
        resources = {"gpu": 1, "memory_gib": 8}

        def setup(self, config):
            pass

        def step(self):
            return {"loss": 1.0}

        def save_checkpoint(self, d):
            pass

        def load_checkpoint(self, d):
            pass

    import sys

    sys.modules[__name__].GpuNet = GpuNet
    spec = ExperimentSpec(workload=f"{__name__}:GpuNet", metric="loss", max_steps=4, search_space={}, top_k=1)
    assert spec.resources == {"gpu": 1.0, "memory_gib": 8.0} and "resources" not in spec.to_dict(include_derived=False)
    spec2 = ExperimentSpec(workload=f"{__name__}:GpuNet", metric="loss", max_steps=4, search_space={}, top_k=1,
                           resources={"cpu": 8})
    assert spec2.resources == {"cpu": 8.0}
    assert ExperimentSpec().resources is None  # the built-in workloads declare nothing: the pool is unchanged


def test_the_pool_keeps_the_types_that_fit(catalog, history, caplog):
    pool = lambda **kw: sorted(m.instance_type for m in Pool(instance_types=TYPES, **kw).resolve(history, catalog))  # noqa: E731
    assert pool() == sorted(TYPES)
    with caplog.at_level(logging.WARNING, logger="provisioner"):
        assert pool(min_gpus=1) == ["g4dn.12xlarge", "g4dn.xlarge", "g5.xlarge"]
    assert "3 listed instance type(s) have fewer vCPUs, GiB or GPUs than a trial needs" in caplog.text
    assert "c5.large, c5.xlarge, m5.large" in caplog.text
    assert pool(min_gpus=2) == ["g4dn.12xlarge"]  # 4 T4
    assert pool(min_vcpus=4, min_memory_gib=16) == ["g4dn.12xlarge", "g4dn.xlarge", "g5.xlarge"]  # c5.xlarge: 8 GiB
    with pytest.raises(NoMarketAvailable, match=r"min_gpus=9\)"):
        pool(min_gpus=9)
    with pytest.raises(ProvisionerConfigError, match="min_gpus is -1"):
        Pool(min_gpus=-1)


def test_the_speed_prior_counts_gpus_for_a_gpu_trainable(catalog):
    cpu = PerformanceMatrix.from_catalog(catalog, ["g4dn.xlarge", "g4dn.12xlarge"], kappa_s=60.0)
    gpu = PerformanceMatrix.from_catalog(catalog, ["g4dn.xlarge", "g4dn.12xlarge"], units="gpus", kappa_s=60.0)
    assert list(cpu.cores) == [48.0, 4.0] and list(gpu.cores) == [4.0, 1.0]  # sorted: g4dn.12xlarge, g4dn.xlarge
    assert gpu.seconds_per_step("t0", "g4dn.xlarge") == 60.0 and gpu.seconds_per_step("t0", "g4dn.12xlarge") == 15.0
    assert cpu.seconds_per_step("t0", "g4dn.12xlarge") == 1.25  # the vCPU prior: 12x optimistic for GPU steps
    pooled = PooledSpeedMatrix.from_catalog(catalog, ["g4dn.xlarge"], units="gpus", reference_cores=1, kappa_s=60.0)
    assert pooled.cores.tolist() == [1.0]
    with pytest.raises(ProvisionerConfigError, match="cores of c5.large is 0"):
        PerformanceMatrix.from_catalog(catalog, ["c5.large"], units="gpus")
    with pytest.raises(ProvisionerConfigError, match="units is 'ecu'"):
        PerformanceMatrix.from_catalog(catalog, ["c5.large"], units="ecu")


def test_make_provisioner_uses_the_gpu_prior_when_the_pool_asks_for_gpus(catalog, history):
    from spottune.compose.provisioning import make_provisioner
    from revpred.baselines import ConstantHazard

    pool = Pool(instance_types=TYPES, min_gpus=1)
    chooser = make_provisioner(history, catalog, pool, ConstantHazard({}), 0, reference_seconds_per_step=60.0)
    perf = chooser.performance
    assert perf.reference_cores == 1.0 and dict(zip(perf.instance_types, perf.cores.tolist())) == {
        "g4dn.12xlarge": 4.0, "g4dn.xlarge": 1.0, "g5.xlarge": 1.0}
    assert perf.kappa_s == 60.0
    cpu = make_provisioner(history, catalog, Pool(instance_types=TYPES), ConstantHazard({}), 0,
                           reference_seconds_per_step=60.0).performance
    assert cpu.reference_cores == 2.0 and cpu.kappa_s == 120.0


def test_simulated_step_time_of_a_gpu_trainable():
    assert seconds_per_step(60.0, 4, None, gpus=1) == 60.0
    assert seconds_per_step(60.0, 48, None, gpus=4) == pytest.approx(24.0)  # Amdahl f = 0.8: A(4) = 2.5
    with pytest.raises(ValueError, match="gpus >= 1"):
        seconds_per_step(60.0, 2, None, gpus=0)
