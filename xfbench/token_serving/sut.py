"""The System Under Test of LoadGen's token mode: prompts in, generated tokens out, each
sample's first token reported the moment its batch's prefill hands it back.

Batches are static: the worker takes the queued prompts (serving.loadgen's policy: up to
the largest bucket, padded with copies of the last prompt to the smallest bucket that
holds them), runs the bucket's generator's prefill, tells LoadGen each sample's first
token (FirstTokenComplete), decodes the remaining tokens, and completes the samples with
all of them. Prompts that arrive meanwhile wait for the whole batch to finish:
continuous batching is out of scope. LoadGen times each sample from its issue to the
first token (TTFT) and to its completion; TPOT is (latency - TTFT) / (tokens - 1).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from xfbench.serving.loadgen import SystemUnderTest
from xfbench.serving.scenarios import Batching

GATHER_SHARE = 0.1  # Server: how long a batch may wait for more prompts, of the TTFT bound


def batching(scenario: str, largest: int, ttft_bound_ms: float) -> Batching:
    """The buckets a scenario needs: SingleStream 1, Offline the largest batch, Server 1
    and the largest (prompts gathered up to it for at most a tenth of the TTFT bound).
    Every prompt queued runs at once, however much padding that takes: a decode step of
    a few sequences costs about one's (it reads the same weights), where running them one
    batch after another would multiply their wait."""
    wanted = {"SingleStream": {1}, "Offline": {largest}, "Server": {1, largest}}[scenario]
    buckets = tuple(sorted(wanted))
    gather = ttft_bound_ms / 1e3 * GATHER_SHARE if scenario == "Server" else 0.0
    return Batching(buckets=buckets, max_batch=buckets[-1], gather_s=gather, padding_limit=1.0)


@dataclass
class Served:
    """What the SUT served, for the record."""

    sequences: int = 0
    tokens: int = 0


class TokenSystemUnderTest(SystemUnderTest):
    """LoadGen's queries in, each bucket's generator's tokens out (see the module doc).
    buckets: batch -> Generator; samples: the prompts (N, ISL)."""

    def __init__(self, buckets: dict, samples: np.ndarray, batching: Batching, new_tokens: int):
        super().__init__(buckets, samples, batching)
        self.new_tokens = new_tokens
        self.out = Served()

    def serve(self, taken: list, bucket: int, x: np.ndarray) -> list:
        import mlperf_loadgen as lg

        generator, n = self.buckets[bucket], len(taken)
        token = generator.prefill(x)
        first = np.ascontiguousarray(token[:n, None], dtype=np.int32)
        self.kept.append(first)
        lg.FirstTokenComplete(
            [lg.QuerySampleResponse(s.id, *_span(first[i]), 1) for i, s in enumerate(taken)]
        )
        out = [token]
        for _ in range(self.new_tokens - 1):
            token = generator.decode(token)
            out.append(token)
        tokens = np.ascontiguousarray(np.stack(out, axis=1)[:n], dtype=np.int32)
        self.kept.append(tokens)  # LoadGen reads the responses during the completion call
        self.out.sequences += n
        self.out.tokens += n * self.new_tokens
        return [
            lg.QuerySampleResponse(s.id, *_span(tokens[i]), self.new_tokens)
            for i, s in enumerate(taken)
        ]


def _span(row: np.ndarray) -> tuple[int, int]:
    """(address, bytes) of one contiguous row, as a QuerySampleResponse takes them."""
    return row.ctypes.data, row.nbytes
