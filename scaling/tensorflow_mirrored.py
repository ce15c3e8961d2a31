"""TensorFlow data-parallel training: MirroredStrategy over W devices of one process,
or MultiWorkerMirroredStrategy across processes (and machines) when TF_CONFIG is set.

    python -m scaling.tensorflow_mirrored --network resnet56 --scale smoke --workers 2 \
        --batch 16 --out result.json

Devices: on a GPU machine one replica per GPU (/GPU:0 .. /GPU:W-1), summed with
NCCL (NcclAllReduce, what MirroredStrategy picks itself on a Linux GPU build). On
the CPU the one physical CPU is split into W logical CPU devices before the runtime
starts; MirroredStrategy then reduces through one device (ReductionToOneDevice, its
default whenever a device is not a GPU; passed explicitly so the record says it).

Threads on the CPU: TensorFlow has ONE intra-op pool per process, shared by every
CPU device of the process (logical devices have no pools of their own). So W replicas
of T threads each are W*T intra-op threads that all replicas' kernels draw from,
W inter-op threads so that the W replicas' kernels run at the same time (with one
inter-op thread the replicas' ops would take turns, each on all W*T threads), and
the process pinned to W*T CPUs. Each replica therefore gets T threads on average
while all W are busy, not a hard partition of T cores each as the torch ranks have.

The step is the TensorFlow adapter's own (adapters/tensorflow/workload.py): its
networks (tf.Modules, fused batch norm), weight import, loss, clipping and fused
momentum update (v = 0.9 v + g; w -= lr v), run by `strategy.run` inside one
tf.function. Between the gradient and the update the gradients are averaged over
the replicas (an all-reduce, MEAN), so every replica applies the same update to its
own copy of the weights; the copies are compared after the timed steps.

Batch norm: each replica normalises its rows with its own batch statistics (no
synchronised batch norm, as in plain PyTorch DDP). The running statistics are kept
per replica (ON_READ variables, their mean when read: Keras's convention under a
strategy; DDP instead copies rank 0's to every rank at each forward). They are not
trained weights, so they are left out of the replica agreement check.

TensorFlow is imported only after the CPU affinity, the thread variables and the
device split are set, inside run().
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from pathlib import Path

import numpy as np

from harness import threads as hthreads
from models import get_spec, initial_weights, synthetic_batch
from models.networks import NETWORKS

FRAMEWORK = "tensorflow"
SEED = 0
#: largest |difference| between replicas' weights that still counts as agreeing
#: (the update is the same arithmetic on the same numbers: 0 is expected)
AGREE_TOL = 0.0


class UsageError(Exception):
    """Bad input: reported as one line, exit status 2."""


# -- the worker CLI -------------------------------------------------------------
# To be replaced by the shared worker parser of scaling.cell when the scaling
# package is merged: the option names and meanings are the contract's.

def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m scaling.tensorflow_mirrored",
                                description="TensorFlow data-parallel training worker")
    p.add_argument("--network", required=True, choices=sorted(NETWORKS))
    p.add_argument("--scale", default="full", choices=("full", "smoke"))
    p.add_argument("--framework", default=FRAMEWORK, choices=(FRAMEWORK,))
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--scaling", default="strong", choices=("strong", "weak"))
    p.add_argument("--batch", type=int, default=None,
                   help="strong: the global batch; weak: the per-worker batch "
                        "(default: the network's batch size at this scale)")
    p.add_argument("--threads-per-worker", type=int, default=None,
                   help="CPU threads per replica (default: allowed CPUs // workers)")
    p.add_argument("--precision", default="fp32", choices=("fp32", "tf32", "bf16", "fp16"))
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--out", required=True, help="where the worker JSON is written")
    return p.parse_args(argv)


def batches(args) -> tuple[int, int]:
    """(global batch, per-replica batch)."""
    if args.scaling == "strong":
        if args.batch % args.workers:
            raise UsageError(f"strong scaling: global batch {args.batch} does not divide "
                             f"by {args.workers} workers")
        return args.batch, args.batch // args.workers
    return args.batch * args.workers, args.batch


def check(args) -> None:
    if args.workers < 1:
        raise UsageError(f"--workers must be at least 1, not {args.workers}")
    if args.batch is not None and args.batch < 1:
        raise UsageError(f"--batch must be at least 1, not {args.batch}")
    if args.warmup < 1 or args.steps < 1:
        raise UsageError("--warmup and --steps must be at least 1 (the first warm-up step "
                         "is the compile step)")
    if args.threads_per_worker is not None and args.threads_per_worker < 1:
        raise UsageError(f"--threads-per-worker must be at least 1, not {args.threads_per_worker}")
    if args.precision == "fp16":
        # fp16's dynamic loss scale skips a step on overflow, decided per replica
        # before the all-reduce: replicas could disagree and the collective hang.
        raise UsageError("fp16 (dynamic loss scaling) is not run data-parallel in TensorFlow; "
                         "use fp32, tf32 or bf16")


# -- the cluster (TF_CONFIG) ------------------------------------------------------

def cluster() -> dict | None:
    """TF_CONFIG's cluster and task when set (MultiWorkerMirroredStrategy), else None."""
    raw = os.environ.get("TF_CONFIG")
    if not raw:
        return None
    try:
        config = json.loads(raw)
        jobs = config["cluster"]
        task = config["task"]
        kind, index = task["type"], int(task["index"])
    except (ValueError, KeyError, TypeError) as e:
        raise UsageError(f"TF_CONFIG is not a valid cluster description: {e}") from e
    chief = kind == "chief" or (kind == "worker" and index == 0 and "chief" not in jobs)
    # The task's place in the cluster: chief first, then the workers.
    order = [("chief", i) for i in range(len(jobs.get("chief", [])))] + \
            [("worker", i) for i in range(len(jobs.get("worker", [])))]
    if (kind, index) not in order:
        raise UsageError(f"TF_CONFIG's task {kind}:{index} is not in its cluster")
    return {"tasks": len(order), "rank": order.index((kind, index)), "chief": chief}


# -- process set-up, before TensorFlow starts ------------------------------------

def pin_cpus(cpus: list[int]) -> None:
    """harness.threads.pin for a given CPU set: the thread variables and BLAS pools
    for len(cpus) threads, and every running thread's affinity to exactly these CPUs."""
    hthreads.pin(len(cpus))
    for tid in Path("/proc/self/task").iterdir():
        try:
            os.sched_setaffinity(int(tid.name), cpus)
        except (ProcessLookupError, ValueError):
            pass


def start_runtime(device: str, local_replicas: int, threads: int, rank: int | None = None):
    """Pin the CPUs and set TensorFlow's threads and devices, then import it. rank: this
    process's place in a multi-process cluster, None for one process. Returns
    (tf, local device names, threads_config)."""
    config = {}
    if device == "cpu":
        allowed = hthreads.allowed_cpus()
        n = local_replicas * threads
        if n > len(allowed):
            raise UsageError(f"{local_replicas} replicas x {threads} threads need {n} CPUs, "
                             f"but this process may use {len(allowed)}")
        if rank is None:
            cpus = hthreads.choose_cpus(n)      # one per physical core first
        else:
            # Several worker processes on one machine take disjoint CPU sets when they fit.
            first = rank * n if (rank + 1) * n <= len(allowed) else 0
            cpus = allowed[first:first + n]
        pin_cpus(cpus)
        config["cpus"] = cpus
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    import tensorflow as tf

    if device == "cpu":
        tf.config.threading.set_intra_op_parallelism_threads(local_replicas * threads)
        tf.config.threading.set_inter_op_parallelism_threads(local_replicas)
        cpu = tf.config.list_physical_devices("CPU")[0]
        if local_replicas > 1:
            tf.config.set_logical_device_configuration(
                cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(local_replicas)])
        names = [f"/CPU:{i}" for i in range(local_replicas)]
        config.update(intra_op=local_replicas * threads, inter_op=local_replicas,
                      logical_cpu_devices=local_replicas,
                      OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS"))
    else:
        gpus = tf.config.list_physical_devices("GPU")
        if len(gpus) < local_replicas:
            raise UsageError(f"{local_replicas} GPU replicas asked for, but TensorFlow sees "
                             f"{len(gpus)} GPU(s)")
        # Only this process's GPUs are visible (MultiWorkerMirroredStrategy takes every
        # visible one); several processes on one machine take disjoint ones when they fit.
        first = (rank or 0) * local_replicas
        first = first if first + local_replicas <= len(gpus) else 0
        mine = gpus[first:first + local_replicas]
        tf.config.set_visible_devices(mine, "GPU")
        names = [f"/GPU:{i}" for i in range(local_replicas)]
        config["gpus"] = [g.name for g in mine]
    return tf, names, config


# -- the replicated step ----------------------------------------------------------

def build(tf, strategy, spec, layout: str, precision: str, use_cudnn: bool):
    """The adapter's workload, its variables made under strategy.scope(), its step's
    gradients averaged over the replicas before the update."""
    from adapters.tensorflow.networks import Network
    from adapters.tensorflow.workload import COMPUTE_DTYPES, TensorFlowWorkload

    class ReplicatedWorkload(TensorFlowWorkload):
        """TensorFlowWorkload's step (_train_fn: loss, gradients, _clip, _apply) with an
        all-reduce (MEAN) of the gradients at the start of _clip, so clipping and the
        update see the averaged gradient on every replica. __init__ builds only what
        the step uses: the batch comes per replica from the strategy."""

        def __init__(self):  # not super().__init__(): it puts one whole batch on one device
            self.spec = spec
            self.compute_dtype = COMPUTE_DTYPES[precision]
            self.loss_scale = self.good_steps = None

            def statistics_per_replica(next_creator, **kwargs):
                # Batch-norm running statistics (layers.Variables.buffer names them
                # "<layer>.running_mean|var"): per replica, read as their mean
                # (Keras's convention). Other variables are left as the strategy makes them.
                if ".running_" in str(kwargs.get("name") or ""):
                    kwargs["synchronization"] = tf.VariableSynchronization.ON_READ
                    kwargs["aggregation"] = tf.VariableAggregation.MEAN
                return next_creator(**kwargs)

            weights = initial_weights(spec, SEED)
            with strategy.scope():
                with tf.variable_creator_scope(statistics_per_replica):
                    self.net = Network(spec, layout, weights, use_cudnn, self.compute_dtype)
                self.trainable = self.net.trainable
                # Momentum buffers: mirrored, updated on each replica by the fused op.
                self.slots = [tf.Variable(tf.zeros(v.shape, v.dtype), trainable=False,
                                          synchronization=tf.VariableSynchronization.ON_WRITE,
                                          aggregation=tf.VariableAggregation.NONE)
                              for v in self.trainable]
            self.lr = tf.constant(spec.lr, tf.float32)
            self.momentum = tf.constant(spec.momentum, tf.float32)

        def _clip(self, grads):
            ctx = tf.distribute.get_replica_context()
            grads = ctx.all_reduce(tf.distribute.ReduceOp.MEAN, grads)
            return super()._clip(grads)

    return ReplicatedWorkload()


class Trainer:
    """The strategy, the replicated workload, the per-replica batch and the step."""

    def __init__(self, tf, strategy, spec, device: str, precision: str, global_batch: int):
        from adapters.tensorflow.workload import preferred_layout, set_fp32_precision

        self.tf, self.strategy, self.spec = tf, strategy, spec
        self.gpu = device == "cuda"
        self.tf32 = set_fp32_precision(precision)
        self.layout = preferred_layout(spec, "cuda" if self.gpu else "cpu", precision)
        self.workload = build(tf, strategy, spec, self.layout, precision, use_cudnn=self.gpu)
        self.replicas = strategy.num_replicas_in_sync
        self.local_devices = list(strategy.extended.worker_devices)
        if global_batch % self.replicas:
            raise UsageError(f"global batch {global_batch} does not divide by "
                             f"{self.replicas} replicas")
        self.per_replica = global_batch // self.replicas

        x, y = synthetic_batch(spec, global_batch, SEED)
        if x.ndim == 4 and self.layout == "channels_last":
            x = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
        b = self.per_replica

        def rows(ctx):
            # Replica r takes rows [r*b, (r+1)*b), placed on its own device.
            r = ctx.replica_id_in_sync_group
            with tf.device(self.local_devices[r % len(self.local_devices)]):
                return (tf.identity(tf.constant(x[r * b:(r + 1) * b])),
                        tf.identity(tf.constant(y[r * b:(r + 1) * b])))

        self.x, self.y = strategy.experimental_distribute_values_from_function(rows)
        self._check_placement()

        def train_step(x, y):
            # The replicas' losses come back as they are: averaging them here would add
            # a collective to every step (across machines under MultiWorkerMirrored).
            return strategy.run(self.workload._train_fn, args=(x, y))

        self.fn = tf.function(train_step, reduce_retracing=False)

    def _check_placement(self) -> None:
        """Every replica has its own copy of the weights, buffers and rows, on its device."""
        from adapters.tensorflow.workload import _same_device
        wrong = []
        for value in list(self.workload.trainable) + self.workload.slots + [self.x, self.y]:
            copies = self.strategy.experimental_local_results(value)
            if len(copies) != len(self.local_devices):   # one variable shared: no replicas
                raise RuntimeError(f"{getattr(value, 'name', 'a batch')} has {len(copies)} "
                                   f"copies for {len(self.local_devices)} replicas")
            for device, local in zip(self.local_devices, copies):
                if not _same_device(local.device, device):
                    wrong.append(f"{local.device} (wanted {device})")
        if wrong:
            raise RuntimeError(f"values not on their replica's device: {sorted(set(wrong))[:3]}")

    def step(self) -> float:
        """One step of the global batch; returns the mean loss of this process's replicas
        once they are all done."""
        losses = self.strategy.experimental_local_results(self.fn(self.x, self.y))
        value = float(np.mean([float(v) for v in losses]))   # the host waits for each
        if self.gpu:
            self.tf.test.experimental.sync_devices()   # and for the queued updates
        return value

    def local_disagreement(self) -> float:
        """Largest |difference| between this process's replicas' copies of the weights
        and momentum buffers (copy 0 against each other copy)."""
        worst = 0.0
        for v in list(self.workload.trainable) + self.workload.slots:
            copies = [c.numpy() for c in self.strategy.experimental_local_results(v)]
            for c in copies[1:]:
                worst = max(worst, float(np.max(np.abs(c - copies[0]), initial=0.0)))
        return worst

    def cluster_disagreement(self) -> float:
        """The same across processes: replica 0's copy reaches every replica through an
        all-reduce SUM in which the others add zeros (exact), each replica measures its
        distance to it, and the distances are gathered."""
        tf, strategy = self.tf, self.strategy
        variables = list(self.workload.trainable) + self.workload.slots

        def distance():
            ctx = tf.distribute.get_replica_context()
            mine = [tf.identity(v) for v in variables]
            first = tf.equal(ctx.replica_id_in_sync_group, 0)
            zero = [tf.where(first, m, tf.zeros_like(m)) for m in mine]
            ref = ctx.all_reduce(tf.distribute.ReduceOp.SUM, zero)
            return tf.reshape(tf.reduce_max(
                tf.stack([tf.reduce_max(tf.abs(m - r)) for m, r in zip(mine, ref)])), [1])

        @tf.function
        def gathered():
            return strategy.gather(strategy.run(distance), axis=0)

        return float(np.max(gathered().numpy()))

    def gather(self, values: list[float]) -> np.ndarray:
        """values (the same length on every process) -> one row per replica of the
        cluster (a process's replicas give the same row)."""
        tf, strategy = self.tf, self.strategy
        local = tf.constant(values, tf.float64)

        def per_replica(ctx):
            with tf.device(self.local_devices[ctx.replica_id_in_sync_group
                                              % len(self.local_devices)]):
                return tf.reshape(tf.identity(local), [1, -1])

        rows = strategy.gather(strategy.experimental_distribute_values_from_function(
            per_replica), axis=0)
        return rows.numpy()

    def barrier(self):
        """Every replica of the cluster reaches this point before any goes on."""
        tf, strategy = self.tf, self.strategy
        if not hasattr(self, "_barrier"):
            def one():
                return tf.distribute.get_replica_context().all_reduce(
                    tf.distribute.ReduceOp.SUM, tf.ones([]))
            self._barrier = tf.function(lambda: strategy.run(one))
        for value in strategy.experimental_local_results(self._barrier()):
            float(value)

    def device_name(self) -> str:
        if not self.gpu:
            return "cpu"
        tf = self.tf
        names = {tf.config.experimental.get_device_details(g).get("device_name", g.name)
                 for g in tf.config.get_visible_devices("GPU")}
        return ", ".join(sorted(names))


# -- the run ------------------------------------------------------------------------

def make_strategy(tf, names: list[str], device: str, multi_worker: bool):
    """(strategy, backend description)."""
    if multi_worker:
        impl = (tf.distribute.experimental.CommunicationImplementation.NCCL if device == "cuda"
                else tf.distribute.experimental.CommunicationImplementation.RING)
        options = tf.distribute.experimental.CommunicationOptions(implementation=impl)
        strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
        return strategy, (f"MultiWorkerMirroredStrategy (CollectiveAllReduce, "
                          f"{impl.name} over gRPC between workers)")
    if device == "cuda":
        ops = tf.distribute.NcclAllReduce(num_packs=1)
    else:
        ops = tf.distribute.ReductionToOneDevice()
    strategy = tf.distribute.MirroredStrategy(devices=names, cross_device_ops=ops)
    return strategy, f"MirroredStrategy ({type(ops).__name__}) over {len(names)} {device} device(s)"


def run(args) -> dict:
    """The whole worker run; returns the worker JSON (or raises UsageError)."""
    check(args)
    spec = get_spec(args.network, args.scale)
    if args.batch is None:
        args.batch = spec.batch_size
    global_batch, per_worker = batches(args)
    tasks = cluster()
    multi = tasks is not None
    if multi:
        if args.workers % tasks["tasks"]:
            raise UsageError(f"--workers {args.workers} is not a multiple of TF_CONFIG's "
                             f"{tasks['tasks']} tasks")
        local = args.workers // tasks["tasks"]
        if args.device == "cpu" and local != 1:
            raise UsageError("MultiWorkerMirroredStrategy runs one CPU replica per process: "
                             f"--workers must equal TF_CONFIG's {tasks['tasks']} tasks")
    else:
        local = args.workers
    threads = args.threads_per_worker or max(1, len(hthreads.allowed_cpus()) // local)

    tf, names, threads_config = start_runtime(args.device, local, threads,
                                              tasks["rank"] if multi else None)
    # MultiWorkerMirroredStrategy must exist before any other op runs.
    strategy, backend = make_strategy(tf, names, args.device, multi)
    if strategy.num_replicas_in_sync != args.workers:
        raise UsageError(f"--workers {args.workers}, but the strategy has "
                         f"{strategy.num_replicas_in_sync} replicas")
    from adapters.tensorflow import ADAPTER

    record = {
        "framework": FRAMEWORK, "network": args.network, "scale": args.scale,
        "device": args.device, "precision": args.precision, "workers": args.workers,
        "scaling": args.scaling, "global_batch": global_batch, "per_worker_batch": per_worker,
        "threads_per_worker": threads, "backend": backend, "threads_config": threads_config,
        "versions": ADAPTER.versions(),
    }
    trainer = Trainer(tf, strategy, spec, args.device, args.precision, global_batch)
    record.update(device_name=trainer.device_name(), layout=trainer.layout, tf32=trainer.tf32)

    t0 = time.perf_counter()
    loss = trainer.step()                  # traces, compiles and runs the first step
    compile_s = time.perf_counter() - t0
    for _ in range(args.warmup - 1):
        loss = trainer.step()

    seconds = []
    with hthreads.CpuMeter() as meter:
        for _ in range(args.steps):
            if multi:
                trainer.barrier()
            t0 = time.perf_counter()
            loss = trainer.step()
            seconds.append(time.perf_counter() - t0)
    # CPU time of this process over the timed steps, per replica it runs (the barriers'
    # few microseconds of waiting included).
    used = meter.threads_used / local if args.device == "cpu" else float("nan")

    diff = trainer.local_disagreement()
    if multi:
        diff = max(diff, trainer.cluster_disagreement())
        # Per step the slowest worker's time; threads_used and the loss averaged.
        rows = trainer.gather(seconds + [used, loss])
        seconds = [float(t) for t in rows[:, :-2].max(axis=0)]
        used, loss = float(rows[:, -2].mean()), float(rows[:, -1].mean())
    agree = bool(np.isfinite(diff) and diff <= AGREE_TOL)

    record.update(
        status="ok" if agree else "failed",
        step_seconds=seconds, compile_s=compile_s, warmup_steps=args.warmup,
        comm_share=None,
        comm_share_how=("not exposed by TensorFlow: it runs the replicas' steps and the "
                        "all-reduce as one graph with no switch to leave the reduction "
                        "out (no no_sync), and the replicas' ops overlap, so a profile's "
                        "per-op times do not add up to a share of the step"),
        replicas_agree=agree, replicas_max_diff=diff, loss=loss,
        threads_used=None if args.device != "cpu" else used,
        multi_worker=({"tasks": tasks["tasks"], "rank": tasks["rank"]} if multi else None),
    )
    if not agree:
        record["reason"] = (f"replicas' weights differ after {args.steps} steps "
                            f"(max |diff| {diff:.3g})")
    record["_chief"] = tasks["chief"] if multi else True
    return record


def write_json(path: str, record: dict) -> None:
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(json.dumps(record, indent=1, default=float))
    os.replace(tmp, out)


def main(argv=None) -> int:
    args = parse_args(argv)
    base = {"status": "failed", "framework": FRAMEWORK, "network": args.network,
            "scale": args.scale, "device": args.device, "workers": args.workers,
            "scaling": args.scaling}
    try:
        record = run(args)
    except UsageError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except Exception as e:  # a crash: the reason in the JSON, the traceback in the log
        traceback.print_exc()
        lines = [line.strip() for line in str(e).splitlines() if line.strip()]
        reason = f"{type(e).__name__}: {lines[-1] if lines else ''}"   # TF puts it last
        write_json(args.out, {**base, "reason": reason})
        print(f"failed: {reason}", file=sys.stderr)
        return 1
    chief = record.pop("_chief")
    if chief:
        write_json(args.out, record)
    if record["status"] != "ok":
        print(f"failed: {record['reason']}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
