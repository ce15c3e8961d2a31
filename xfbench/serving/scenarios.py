"""The four scenarios of MLPerf Inference, as xfbench drives them through LoadGen: their
names, how long each runs per preset, the batching policy and the latency bounds.

Durations: LoadGen runs each scenario at least `min_duration_s` and stops then (its
minimum query count is set to 1, so the duration decides; MLPerf's official runs last
600 s with their own query counts, named here, not the default). The Server scenario is
a search: several LoadGen runs, each `min_duration_s` long, within `search_budget_s`.
"""

from __future__ import annotations

from dataclasses import dataclass

MULTISTREAM_SAMPLES = 8  # MLPerf's samples per MultiStream query


@dataclass(frozen=True)
class Scenario:
    """One of LoadGen's scenarios as every table shows it: its number is the record's
    `field`, in `unit`."""

    name: str  # LoadGen's
    metric: str  # what its number is, for tables and docs
    unit: str
    field: str


# In the order a cell's scenarios run; every table's scenario columns follow it.
SCENARIO_TABLE = (
    Scenario(
        "SingleStream", "p90 latency of batch-1 queries sent back to back", "p90 ms", "p90_ms"
    ),
    Scenario(
        "MultiStream",
        f"p99 latency of {MULTISTREAM_SAMPLES}-sample queries sent back to back",
        "p99 ms",
        "p99_ms",
    ),
    Scenario(
        "Server",
        "the highest Poisson arrival rate (queries/s) whose p99 latency meets the bound",
        "QPS",
        "server_qps",
    ),
    Scenario("Offline", "samples/s with every sample issued at once", "samples/s", "samples_per_s"),
)
SCENARIOS = tuple(s.name for s in SCENARIO_TABLE)
BY_NAME = {s.name: s for s in SCENARIO_TABLE}
METRIC = {s.name: s.metric for s in SCENARIO_TABLE}
IDS = {s: s.lower() for s in SCENARIOS}  # the test ids' last part
BY_ID = {v: k for k, v in IDS.items()}

# Server's p99 latency bound per network, in ms. MLPerf Inference's datacenter bounds where
# it has the network (ResNet-50: 15 ms; BERT: 130 ms, set for BERT-large and kept for
# BERT-base); for the others, the bound of MLPerf's network of the same kind (image
# classifiers and the fully connected networks: ResNet-50's; language models: BERT's).
# --latency-bound MS replaces it.
MLPERF_BOUND_MS = {"resnet50": 15.0, "bert_base": 130.0}
KIND_BOUND_MS = {"image": 15.0, "language": 130.0}


def latency_bound_ms(network: str, sequence: bool) -> tuple[float, str]:
    """The Server bound of a network and where it comes from."""
    if network in MLPERF_BOUND_MS:
        return MLPERF_BOUND_MS[network], "MLPerf Inference's datacenter Server bound"
    kind = "language" if sequence else "image"
    source = "BERT's" if sequence else "ResNet-50's"
    return KIND_BOUND_MS[kind], f"MLPerf's bound for {source} kind of network"


@dataclass(frozen=True)
class Timing:
    min_duration_s: float  # each LoadGen run
    search_runs: int  # Server: LoadGen runs of the QPS search, at most
    search_budget_s: float  # Server: and at most this long in all
    samples: int  # the query sample library's performance set


# Per preset (harness.presets names): smoke about a second, quick about 10 s, paper 60 s.
TIMING = {
    "smoke": Timing(min_duration_s=1.0, search_runs=3, search_budget_s=10.0, samples=32),
    "quick": Timing(min_duration_s=10.0, search_runs=5, search_budget_s=75.0, samples=256),
    "paper": Timing(min_duration_s=60.0, search_runs=7, search_budget_s=600.0, samples=1024),
}


def timing(preset: str) -> Timing:
    """The preset's timing; table7 and procurement are training presets, timed as quick."""
    return TIMING.get(preset, TIMING["quick"])


@dataclass(frozen=True)
class Batching:
    """One policy for every framework: a bucket per batch size, each built and compiled (or
    traced) before LoadGen starts, so nothing compiles under load; a gathered batch runs in
    the smallest bucket that holds it, padded with copies of its last sample (the padding
    is computed and counted, and its results thrown away)."""

    buckets: tuple[int, ...]
    max_batch: int
    gather_s: float  # Server: a batch closes when full or this long after its first sample
    # the largest share of a batch that may be padding: beyond it the SUT runs the samples
    # that fill a smaller bucket and leaves the rest queued (1: any, all queued run at once)
    padding_limit: float = 0.5

    def bucket(self, n: int) -> int:
        return next(b for b in self.buckets if b >= n)

    def describe(self) -> dict:
        return {
            "buckets": list(self.buckets),
            "max_batch": self.max_batch,
            "gather_ms": round(self.gather_s * 1e3, 3),
            "padding": "copies of the batch's last sample; their results are discarded",
            "padding_limit": self.padding_limit,
            "compiled_before_load": True,
        }


GATHER_SHARE = 0.1  # Server: how long a batch may wait for more samples, as a share of the bound


def batching(scenario: str, batch: int, bound_ms: float) -> Batching:
    """The buckets a scenario needs, at most the cell's batch: SingleStream 1, MultiStream
    8, Offline the batch, Server 1, 8 and the batch (queries gathered up to it)."""
    wanted = {
        "SingleStream": {1},
        "MultiStream": {MULTISTREAM_SAMPLES},
        "Offline": {batch},
        "Server": {1, MULTISTREAM_SAMPLES, batch},
    }[scenario]
    buckets = tuple(sorted(b for b in wanted if b <= batch) or [batch])
    if scenario == "MultiStream" and buckets[-1] < MULTISTREAM_SAMPLES:
        buckets = (MULTISTREAM_SAMPLES,)  # a query of 8 runs as one batch of 8
    gather = bound_ms / 1e3 * GATHER_SHARE if scenario == "Server" else 0.0
    return Batching(buckets=buckets, max_batch=buckets[-1], gather_s=gather)
