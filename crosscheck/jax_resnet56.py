"""A plain, hand-written JAX training loop for ResNet-56 on CIFAR-sized input, to hold the
suite's JAX number against. It shares no code with xfbench: its own network in
jax.numpy/lax, NHWC, the same geometry (docs/models.md), one jitted step with the state
donated, true fp32 (matmul precision "highest").

    python crosscheck/jax_resnet56.py --threads 1 --batch 128 --steps 20

prints the compile time of the first step and the median seconds per step after
warm-up. Compare with:

    pytest xfbench/suites/test_train.py --framework jax --model resnet56 --threads 1 --preset quick
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--threads",
        type=int,
        default=None,
        help="CPU threads (sets the CPU affinity and NPROC before jax starts)",
    )
    p.add_argument("--batch", type=int, default=128, help="mini-batch size (default 128)")
    p.add_argument("--steps", type=int, default=20, help="timed steps (default 20)")
    p.add_argument(
        "--warmup", type=int, default=2, help="untimed steps after the first (default 2)"
    )
    args = p.parse_args(argv)
    for name in ("batch", "steps"):
        if getattr(args, name) < 1:
            p.error(f"--{name} must be at least 1")
    if args.warmup < 0:
        p.error("--warmup must be at least 0")
    if args.threads is not None:
        cpus = sorted(os.sched_getaffinity(0))
        if not 1 <= args.threads <= len(cpus):
            p.error(f"--threads must be between 1 and {len(cpus)} (the CPUs this process may use)")
        # XLA sizes its CPU thread pools from these when it starts: set them before importing jax.
        os.sched_setaffinity(0, cpus[: args.threads])
        os.environ["NPROC"] = str(args.threads)
        for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
            os.environ[var] = str(args.threads)
    return args


def main(argv=None) -> int:
    args = parse_args(argv)

    import jax
    import jax.numpy as jnp
    from jax import lax

    jax.config.update("jax_default_matmul_precision", "highest")

    def conv(x, w, stride):
        return lax.conv_general_dilated(
            x, w, (stride, stride), ((1, 1), (1, 1)), dimension_numbers=("NHWC", "HWIO", "NHWC")
        )

    def bn(x, p, s, train):
        if train:
            mean = x.mean((0, 1, 2))
            var = ((x - mean) ** 2).mean((0, 1, 2))
            n = x.shape[0] * x.shape[1] * x.shape[2]
            s = {
                "mean": 0.9 * s["mean"] + 0.1 * lax.stop_gradient(mean),
                "var": 0.9 * s["var"] + 0.1 * lax.stop_gradient(var) * n / (n - 1),
            }
        else:
            mean, var = s["mean"], s["var"]
        return (x - mean) * (p["g"] * lax.rsqrt(var + 1e-5)) + p["b"], s

    # The network: conv 16, then 3 stages of 9 basic blocks (16/32/64), GAP, fc 10.
    plan = [(16, 16, 1)] * 9 + [(16, 32, 2)] + [(32, 32, 1)] * 8 + [(32, 64, 2)] + [(64, 64, 1)] * 8

    def init(key):
        keys = iter(jax.random.split(key, 3 + 2 * len(plan)))

        def kernel(cin, cout):
            bound = 1 / (9 * cin) ** 0.5
            return jax.random.uniform(next(keys), (3, 3, cin, cout), jnp.float32, -bound, bound)

        def norm(c):
            return {"g": jnp.ones(c), "b": jnp.zeros(c)}, {"mean": jnp.zeros(c), "var": jnp.ones(c)}

        params, stats = {"stem": kernel(3, 16)}, {}
        params["stem_bn"], stats["stem_bn"] = norm(16)
        params["blocks"], stats["blocks"] = [], []
        for cin, cout, _ in plan:
            (p1, s1), (p2, s2) = norm(cout), norm(cout)
            params["blocks"].append(
                {"w1": kernel(cin, cout), "bn1": p1, "w2": kernel(cout, cout), "bn2": p2}
            )
            stats["blocks"].append({"bn1": s1, "bn2": s2})
        bound = 1 / 64**0.5
        params["fc_w"] = jax.random.uniform(next(keys), (64, 10), jnp.float32, -bound, bound)
        params["fc_b"] = jax.random.uniform(next(keys), (10,), jnp.float32, -bound, bound)
        return params, stats

    def forward(params, stats, x, train):
        new = {"blocks": []}
        h, new["stem_bn"] = bn(
            conv(x, params["stem"], 1), params["stem_bn"], stats["stem_bn"], train
        )
        h = jax.nn.relu(h)
        for (cin, cout, stride), p, s in zip(plan, params["blocks"], stats["blocks"]):
            out, s1 = bn(conv(h, p["w1"], stride), p["bn1"], s["bn1"], train)
            out, s2 = bn(conv(jax.nn.relu(out), p["w2"], 1), p["bn2"], s["bn2"], train)
            new["blocks"].append({"bn1": s1, "bn2": s2})
            short = h
            if stride != 1 or cin != cout:  # option A: every second pixel, zero-padded channels
                extra = cout - cin
                short = jnp.pad(
                    h[:, ::stride, ::stride, :],
                    ((0, 0), (0, 0), (0, 0), (extra // 2, extra - extra // 2)),
                )
            h = jax.nn.relu(out + short)
        return h.mean((1, 2)) @ params["fc_w"] + params["fc_b"], new

    def train_step(state, x, y):
        params, momentum, stats = state

        def loss_fn(p):
            logits, new_stats = forward(p, stats, x, True)
            logp = jax.nn.log_softmax(logits)
            return -jnp.take_along_axis(logp, y[:, None], 1).mean(), new_stats

        (loss, new_stats), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
        momentum = jax.tree.map(lambda v, g: 0.9 * v + g, momentum, grads)
        params = jax.tree.map(lambda w, v: w - 0.01 * v, params, momentum)
        return (params, momentum, new_stats), loss

    step = jax.jit(train_step, donate_argnums=0)
    params, stats = init(jax.random.key(0))
    state = (params, jax.tree.map(jnp.zeros_like, params), stats)
    kx, ky = jax.random.split(jax.random.key(1))
    x = jax.random.normal(kx, (args.batch, 32, 32, 3), jnp.float32)
    y = jax.random.randint(ky, (args.batch,), 0, 10)
    jax.block_until_ready((state, x, y))

    t0 = time.perf_counter()
    state, loss = step(state, x, y)
    jax.block_until_ready((state, loss))
    compile_s = time.perf_counter() - t0
    for _ in range(args.warmup):
        state, loss = step(state, x, y)
        jax.block_until_ready((state, loss))
    times = []
    cpu0, wall0 = time.process_time(), time.perf_counter()
    for _ in range(args.steps):
        t0 = time.perf_counter()
        state, loss = step(state, x, y)
        jax.block_until_ready((state, loss))
        times.append(time.perf_counter() - t0)
    threads_used = (time.process_time() - cpu0) / (time.perf_counter() - wall0)

    print(
        f"jax {jax.__version__} on {jax.devices()[0].device_kind}, "
        f"cpus allowed {len(os.sched_getaffinity(0))}, batch {args.batch}"
    )
    print(f"compile_s {compile_s:.3f}")
    print(
        f"median_s_per_step {statistics.median(times):.5f} over {args.steps} steps "
        f"(min {min(times):.5f}, max {max(times):.5f})"
    )
    print(f"threads_used {threads_used:.2f}")
    print(f"final_loss {float(loss):.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
