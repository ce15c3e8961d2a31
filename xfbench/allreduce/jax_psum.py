"""jax.lax.psum over W devices, and the parameter-server baseline.

One process drives W devices: W GPUs, or on CPU W host devices made with
XLA_FLAGS=--xla_force_host_platform_device_count=W (set here, before jax is
imported). Device i holds row i of a (W, count) array, sharded over a 1-D mesh:

    python -m xfbench.allreduce.jax_psum --world-size 2 --device cpu --sizes 1KB:1MB --out psum.json

allreduce: jax.shard_map of jax.lax.psum over the mesh axis (jitted; XLA's all-reduce).
parameter_server: every row to device 0 (jax.device_put), summed there, the sum put
back on every device: literally the parameter-server pattern, device 0 the server
(the torch worker's parameter_server; JAX has no reduce-to-one collective to measure
as torch's reduce_broadcast).
Each size is checked (device i gives i+1, every device must hold W(W+1)/2), warmed
up, timed (each operation until its result is ready on every device), and checked
again. The rows and the printed tables are those of the torch worker.
"""

from __future__ import annotations

import os
import sys
import time
import traceback

from xfbench.adapters.jax import host_devices_env
from xfbench.allreduce import FRAMEWORK_PATTERNS, ITEM_BYTES
from xfbench.allreduce.check import expected_sum
from xfbench.allreduce.rows import measure
from xfbench.allreduce.table import sweep_tables
from xfbench.allreduce.timing import TIMINGS
from xfbench.allreduce.worker_args import fault, parser
from xfbench.allreduce.worker_common import failure, pin_to, rank_cpus, write_result

PROG = "python -m xfbench.allreduce.jax_psum"
PATTERNS = FRAMEWORK_PATTERNS["jax"]


class Collectives:
    def __init__(self, devices, world: int):
        import jax
        import jax.numpy as jnp
        import numpy as np
        from jax.sharding import Mesh, NamedSharding
        from jax.sharding import PartitionSpec as P

        self.jax, self.jnp, self.world = jax, jnp, world
        self.mesh = Mesh(np.array(devices[:world]), ("i",))
        self.rows = NamedSharding(self.mesh, P("i"))
        self.replicated = NamedSharding(self.mesh, P())
        self.dev0 = devices[0]
        wrong = fault() == "max"
        reduce = jax.lax.pmax if wrong else jax.lax.psum
        self._allreduce = jax.jit(
            jax.shard_map(
                lambda x: reduce(x, "i"), mesh=self.mesh, in_specs=P("i"), out_specs=P("i")
            )
        )
        self._sum0 = jax.jit(lambda x: jnp.max(x, axis=0) if wrong else jnp.sum(x, axis=0))
        self._errors = jax.jit(lambda y, e: (jnp.max(jnp.abs(y - e)), jnp.count_nonzero(y != e)))

    def inputs(self, count: int):
        jnp, w = self.jnp, self.world
        make = self.jax.jit(
            lambda: jnp.broadcast_to((jnp.arange(w, dtype=jnp.float32) + 1)[:, None], (w, count)),
            out_shardings=self.rows,
        )
        return make()

    def allreduce(self, x):
        return self._allreduce(x)

    def parameter_server(self, x):
        on_dev0 = self.jax.device_put(x, self.dev0)
        return self.jax.device_put(self._sum0(on_dev0), self.replicated)

    def check(self, run, x) -> tuple[float, int]:
        """(max_abs_err, wrong elements) over every device's copy of the result."""
        y = run(x)
        err, wrong = 0.0, 0
        expected = expected_sum(self.world)
        for shard in y.addressable_shards:
            e, n = self._errors(shard.data, expected)
            e = float(e)
            err = max(err, float("inf") if e != e else e)
            wrong += int(n)
        return err, wrong

    def time(self, run, x, rounds: int) -> list[float]:
        times = []
        for _ in range(rounds):
            t0 = time.perf_counter()
            self.jax.block_until_ready(run(x))
            times.append(time.perf_counter() - t0)
        return times


def sweep(c: Collectives, sizes, timing, warmup, fixed_rounds, meta) -> list[dict]:
    rows = []
    for nbytes in sizes:
        x = c.inputs(nbytes // ITEM_BYTES)
        for pattern in PATTERNS:
            rows.append(
                measure(
                    c=c,
                    pattern=pattern,
                    nbytes=nbytes,
                    data=x,
                    timing=timing,
                    warmup=warmup,
                    fixed_rounds=fixed_rounds,
                    meta=meta,
                )
            )
        del x
    return rows


def main(argv=None) -> int:
    p = parser(PROG)
    p.add_argument("--world-size", type=int, default=1, help="devices to reduce over")
    args = p.parse_args(argv)
    world = args.world_size
    if world < 1:
        p.error("--world-size must be positive")
    per = args.threads_per_rank
    cpus = rank_cpus(0, 1, world * per if per else None)
    if args.device == "cpu":
        os.environ.update(host_devices_env(world, dict(os.environ)))
        pin_to(cpus)
    import jax
    import jaxlib

    platform = "cpu" if args.device == "cpu" else "gpu"
    try:
        devices = jax.devices(platform)
    except RuntimeError:
        devices = []
    if len(devices) < world:
        reason = f"{world} {platform} devices asked for, but jax sees {len(devices)}"
        print(reason, file=sys.stderr)
        write_result(args.out, failure("jax", args.device, world, reason, unavailable=True))
        return 1
    if args.device == "cpu":
        from xfbench.machine import cpu_model

        device_name = cpu_model()
    else:
        device_name = devices[0].device_kind
    timing = TIMINGS[args.preset]
    warmup = max(1, args.warmup if args.warmup is not None else timing.warmup)
    meta = {
        "framework": "jax",
        "backend": "xla",
        "device": args.device,
        "device_name": device_name,
        "world_size": world,
        "versions": {"jax": jax.__version__, "jaxlib": jaxlib.__version__},
    }
    try:
        rows = sweep(
            c=Collectives(devices, world),
            sizes=args.sizes,
            timing=timing,
            warmup=warmup,
            fixed_rounds=args.rounds,
            meta=meta,
        )
    except Exception as e:
        traceback.print_exc()
        write_result(
            args.out,
            failure(
                "jax",
                args.device,
                world,
                f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}",
            ),
        )
        return 1
    threads = max(1, len(cpus) // world) if args.device == "cpu" else None
    result = {
        "status": "ok",
        **meta,
        "timing": {**timing.as_dict(), "warmup": warmup},
        "threads_per_rank": threads,
        "rows": rows,
    }
    print(sweep_tables(rows), flush=True)
    write_result(args.out, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
