"""TensorFlow data-parallel training: MirroredStrategy over W devices of one process,
or MultiWorkerMirroredStrategy across processes (and machines) when TF_CONFIG is set.

    python -m xfbench.scaling.tensorflow_mirrored --network resnet56 --framework tensorflow \
        --workers 2 --batch 128 --out r.json

(scaling/launch.py builds this command; the command line is the workers' shared one,
scaling/cell.py.)

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
the process pinned to W*T CPUs (T: --threads-per-worker). Each replica therefore
gets T threads on average while all W are busy, not a hard partition of T cores each
as the torch ranks have.

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

TensorFlow is imported only after the CPU affinity and the thread variables are set
(scaling.result.pin, in main), and its threads and devices are configured before its
runtime starts (start_runtime).

Exit status as the other workers: 2 with one line for bad input; 0 once the worker JSON
is written, whatever its status; an exception writes a failed JSON and is re-raised.
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np

from xfbench.errors import UsageError
from xfbench.scaling import result as R
from xfbench.scaling.cell import ScalingCell, WorkerTask, parse_args
from xfbench.scaling.protocol import Hooks, measure

PROG = "python -m xfbench.scaling.tensorflow_mirrored"


# -- before TensorFlow starts: the cluster, the replicas of this process, its CPUs ----


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
    order = [("chief", i) for i in range(len(jobs.get("chief", [])))] + [
        ("worker", i) for i in range(len(jobs.get("worker", [])))
    ]
    if (kind, index) not in order:
        raise UsageError(f"TF_CONFIG's task {kind}:{index} is not in its cluster")
    return {"tasks": len(order), "rank": order.index((kind, index)), "chief": chief}


def local_replicas(cell: ScalingCell, tasks: dict | None) -> int:
    """The replicas this process runs (all of them without TF_CONFIG)."""
    if cell.precision == "fp16":
        # fp16's dynamic loss scale skips a step on overflow, decided per replica
        # before the all-reduce: replicas could disagree and the collective hang.
        raise UsageError(
            "fp16 (dynamic loss scaling) is not run data-parallel in TensorFlow; "
            "use fp32, tf32 or bf16"
        )
    if tasks is None:
        return cell.workers
    if cell.workers % tasks["tasks"]:
        raise UsageError(
            f"--workers {cell.workers} is not a multiple of TF_CONFIG's {tasks['tasks']} tasks"
        )
    if cell.device == "cpu" and cell.workers != tasks["tasks"]:
        raise UsageError(
            "MultiWorkerMirroredStrategy runs one CPU replica per process: "
            f"--workers must equal TF_CONFIG's {tasks['tasks']} tasks"
        )
    return cell.workers // tasks["tasks"]


def process_cpus(cell: ScalingCell, local: int, tasks: dict | None) -> list[int]:
    """local * T of the available CPUs. Cluster processes on one machine take disjoint
    sets by rank when they fit; on machines of their own, the first ones."""
    first = tasks["rank"] * local if tasks else 0
    try:
        return R.worker_cpus(first, cell.threads_per_worker, local)
    except RuntimeError:
        if not first:
            raise
        return R.worker_cpus(0, cell.threads_per_worker, local)


def start_runtime(device: str, local: int, threads: int, rank: int | None = None):
    """Set TensorFlow's threads and devices, then start it (the process is pinned
    already). rank: this process's place in a cluster, None for one process.
    Returns (tf, local device names, threads_config)."""
    from xfbench.adapters.tensorflow import import_tensorflow

    tf = import_tensorflow()
    if device == "cpu":
        tf.config.threading.set_intra_op_parallelism_threads(local * threads)
        tf.config.threading.set_inter_op_parallelism_threads(local)
        cpu = tf.config.list_physical_devices("CPU")[0]
        if local > 1:
            tf.config.set_logical_device_configuration(
                cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(local)]
            )
        names = [f"/CPU:{i}" for i in range(local)]
        config = {
            "intra_op": local * threads,
            "inter_op": local,
            "logical_cpu_devices": local,
            "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"),
        }
        return tf, names, config
    gpus = tf.config.list_physical_devices("GPU")
    if len(gpus) < local:
        raise RuntimeError(
            f"{local} GPU replicas asked for, but TensorFlow sees {len(gpus)} GPU(s)"
        )
    # Only this process's GPUs are visible (MultiWorkerMirroredStrategy takes every
    # visible one); several processes on one machine take disjoint ones when they fit.
    first = (rank or 0) * local
    first = first if first + local <= len(gpus) else 0
    mine = gpus[first : first + local]
    tf.config.set_visible_devices(mine, "GPU")
    return tf, [f"/GPU:{i}" for i in range(local)], {"gpus": [g.name for g in mine]}


# -- the replicated step ----------------------------------------------------------


def build(tf, strategy, spec, layout: str, precision: str, use_cudnn: bool):
    """The adapter's workload, its variables made under strategy.scope(), its step's
    gradients averaged over the replicas before the update."""
    from xfbench.adapters.tensorflow.networks import Network
    from xfbench.adapters.tensorflow.workload import COMPUTE_DTYPES, TensorFlowWorkload
    from xfbench.models import initial_weights

    class ReplicatedWorkload(TensorFlowWorkload):
        """TensorFlowWorkload's step (_train_fn: loss, gradients, _clip, _apply) with an
        all-reduce (MEAN) of the gradients at the start of _clip, so clipping and the
        update see the averaged gradient on every replica. __init__ builds only what
        the step uses: the batch comes per replica from the strategy."""

        def __init__(self):  # not super().__init__(): it puts one whole batch on one device
            self.spec = spec
            self.compute_dtype = COMPUTE_DTYPES[precision]
            # the loss's and the update's type, as TensorFlowWorkload sets it
            self.master_dtype = tf.float64 if self.compute_dtype == tf.float64 else tf.float32
            self.loss_scale = self.good_steps = None

            def statistics_per_replica(next_creator, **kwargs):
                # Batch-norm running statistics (layers.Variables.buffer names them
                # "<layer>.running_mean|var"): per replica, read as their mean
                # (Keras's convention). Other variables are left as the strategy makes them.
                if ".running_" in str(kwargs.get("name") or ""):
                    kwargs["synchronization"] = tf.VariableSynchronization.ON_READ
                    kwargs["aggregation"] = tf.VariableAggregation.MEAN
                return next_creator(**kwargs)

            weights = initial_weights(spec, 0)
            with strategy.scope():
                with tf.variable_creator_scope(statistics_per_replica):
                    self.net = Network(
                        spec=spec,
                        layout=layout,
                        weights=weights,
                        use_cudnn=use_cudnn,
                        compute_dtype=self.compute_dtype,
                    )
                self.trainable = self.net.trainable
                self._mirrored_optimizer_state()
            self.lr = tf.constant(spec.lr, self.master_dtype)
            self.momentum = tf.constant(spec.momentum, self.master_dtype)

        def _mirrored_optimizer_state(self) -> None:
            """Momentum, or AdamW's moments and step: mirrored, made under strategy.scope()."""

            def slots():
                """Zeros beside each variable, mirrored, updated on each replica by
                the fused op."""
                return [
                    tf.Variable(
                        tf.zeros(v.shape, v.dtype),
                        trainable=False,
                        synchronization=tf.VariableSynchronization.ON_WRITE,
                        aggregation=tf.VariableAggregation.NONE,
                    )
                    for v in self.trainable
                ]

            self.slots = slots()  # momentum, or AdamW's first moments
            if spec.optimizer == "adamw":  # its second moments and step, mirrored
                self.second_moments = slots()
                self.adam_steps = tf.Variable(
                    0,
                    trainable=False,
                    dtype=tf.int64,
                    synchronization=tf.VariableSynchronization.ON_WRITE,
                    aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA,
                )
                self.decays = [spec.decays(e.name) for e in self.net.variables.entries]

        # Read while tracing: False only while Trainer traces its step without the
        # all-reduce (comm_share's comparison), each replica then updating with its own.
        average = True

        def _clip(self, grads):
            if self.average:
                ctx = tf.distribute.get_replica_context()
                grads = ctx.all_reduce(tf.distribute.ReduceOp.MEAN, grads)
            return super()._clip(grads)

    return ReplicatedWorkload()


class Trainer:
    """The strategy, the replicated workload, the per-replica batch and the step."""

    def __init__(self, tf, strategy, spec, device: str, precision: str, global_batch: int):
        from xfbench.adapters.tensorflow.workload import preferred_layout, set_fp32_precision
        from xfbench.models import synthetic_batch

        self.tf, self.strategy, self.spec = tf, strategy, spec
        self.gpu = device == "cuda"
        self.tf32 = set_fp32_precision(precision)
        self.layout = preferred_layout(spec, "cuda" if self.gpu else "cpu", precision)
        self.workload = build(
            tf=tf,
            strategy=strategy,
            spec=spec,
            layout=self.layout,
            precision=precision,
            use_cudnn=self.gpu,
        )
        self.replicas = strategy.num_replicas_in_sync
        self.local_devices = list(strategy.extended.worker_devices)
        if global_batch % self.replicas:
            raise RuntimeError(
                f"global batch {global_batch} does not divide by {self.replicas} replicas"
            )
        self.per_replica = global_batch // self.replicas

        x, y = synthetic_batch(spec, global_batch, 0)
        if x.ndim == 4 and self.layout == "channels_last":
            x = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
        b = self.per_replica

        def rows(ctx):
            # Replica r takes rows [r*b, (r+1)*b), placed on its own device.
            r = ctx.replica_id_in_sync_group
            with tf.device(self.local_devices[r % len(self.local_devices)]):
                return (
                    tf.identity(tf.constant(x[r * b : (r + 1) * b])),
                    tf.identity(tf.constant(y[r * b : (r + 1) * b])),
                )

        self.x, self.y = strategy.experimental_distribute_values_from_function(rows)
        self._check_placement()

        def train_step(x, y):
            # The replicas' losses come back as they are: averaging them here would add
            # a collective to every step (across machines under MultiWorkerMirrored).
            return strategy.run(self.workload._train_fn, args=(x, y))

        self.fn = tf.function(train_step, reduce_retracing=False)
        self.local_fn = None

    def trace_local_step(self) -> None:
        """Trace (without running) the same step with no gradient all-reduce: each replica
        updates its copy with its own gradient, so the copies diverge once it runs. The
        flag is set around strategy.run, whose replica threads have all finished tracing
        when it returns."""
        tf, strategy, workload = self.tf, self.strategy, self.workload

        def local_step(x, y):
            workload.average = False
            try:
                return strategy.run(workload._train_fn, args=(x, y))
            finally:
                workload.average = True

        self.local_fn = tf.function(local_step, reduce_retracing=False)
        self.local_fn.get_concrete_function(self.x, self.y)

    def _check_placement(self) -> None:
        """Every replica has its own copy of the weights, buffers and rows, on its device."""
        from xfbench.adapters.tensorflow.workload import _same_device

        wrong = []
        for value in list(self.workload.trainable) + self.workload.slots + [self.x, self.y]:
            copies = self.strategy.experimental_local_results(value)
            if len(copies) != len(self.local_devices):  # one variable shared: no replicas
                raise RuntimeError(
                    f"{getattr(value, 'name', 'a batch')} has {len(copies)} "
                    f"copies for {len(self.local_devices)} replicas"
                )
            for device, local in zip(self.local_devices, copies):
                if not _same_device(local.device, device):
                    wrong.append(f"{local.device} (wanted {device})")
        if wrong:
            raise RuntimeError(f"values not on their replica's device: {sorted(set(wrong))[:3]}")

    def step(self, local: bool = False) -> float:
        """One step of the global batch (local: the traced step without the gradient
        all-reduce); returns the mean loss of this process's replicas once they are all done."""
        fn = self.local_fn if local else self.fn
        losses = self.strategy.experimental_local_results(fn(self.x, self.y))
        value = float(np.mean([float(v) for v in losses]))  # the host waits for each
        if self.gpu:
            self.tf.test.experimental.sync_devices()  # and for the queued updates
        return value

    def local_disagreement(self) -> tuple[float, float]:
        """(largest |difference| between this process's replicas' copies of the weights
        and momentum buffers, copy 0 against each other copy; largest |value| of copy 0)."""
        worst = scale = 0.0
        for v in list(self.workload.trainable) + self.workload.slots:
            copies = [c.numpy() for c in self.strategy.experimental_local_results(v)]
            scale = max(scale, float(np.max(np.abs(copies[0]), initial=0.0)))
            for c in copies[1:]:
                worst = max(worst, float(np.max(np.abs(c - copies[0]), initial=0.0)))
        return worst, scale

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
            return tf.reshape(
                tf.reduce_max(tf.stack([tf.reduce_max(tf.abs(m - r)) for m, r in zip(mine, ref)])),
                [1],
            )

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
            with tf.device(
                self.local_devices[ctx.replica_id_in_sync_group % len(self.local_devices)]
            ):
                return tf.reshape(tf.identity(local), [1, -1])

        rows = strategy.gather(
            strategy.experimental_distribute_values_from_function(per_replica), axis=0
        )
        return rows.numpy()

    def barrier(self):
        """Every replica of the cluster reaches this point before any goes on."""
        tf, strategy = self.tf, self.strategy
        if not hasattr(self, "_barrier"):

            def one():
                return tf.distribute.get_replica_context().all_reduce(
                    tf.distribute.ReduceOp.SUM, tf.ones([])
                )

            self._barrier = tf.function(lambda: strategy.run(one))
        for value in strategy.experimental_local_results(self._barrier()):
            float(value)

    def device_name(self) -> str:
        if not self.gpu:
            return "cpu"
        tf = self.tf
        names = {
            tf.config.experimental.get_device_details(g).get("device_name", g.name)
            for g in tf.config.get_visible_devices("GPU")
        }
        return ", ".join(sorted(names))


# -- the run ------------------------------------------------------------------------


def make_strategy(tf, names: list[str], device: str, multi_worker: bool):
    """(strategy, backend description)."""
    if multi_worker:
        impl = (
            tf.distribute.experimental.CommunicationImplementation.NCCL
            if device == "cuda"
            else tf.distribute.experimental.CommunicationImplementation.RING
        )
        options = tf.distribute.experimental.CommunicationOptions(implementation=impl)
        strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
        return strategy, (
            f"MultiWorkerMirroredStrategy (CollectiveAllReduce, "
            f"{impl.name} over gRPC between workers)"
        )
    if device == "cuda":
        ops = tf.distribute.NcclAllReduce(num_packs=1)
    else:
        ops = tf.distribute.ReductionToOneDevice()
    strategy = tf.distribute.MirroredStrategy(devices=names, cross_device_ops=ops)
    return strategy, f"MirroredStrategy ({type(ops).__name__}) over {len(names)} {device} device(s)"


def main(argv: list[str] | None = None) -> int:
    run = parse_args(argv, framework="tensorflow", prog=PROG)
    cell = run.cell
    try:
        tasks = cluster()
        local = local_replicas(cell, tasks)
    except UsageError as e:
        sys.stderr.write(f"{PROG}: error: {e}\n")
        return 2
    chief = tasks is None or tasks["chief"]  # the one process that writes --out
    if cell.device == "cpu":
        try:
            cpus = process_cpus(cell, local, tasks)
        except RuntimeError as e:
            if chief:
                R.write(run.out, R.failed(cell, str(e)))
            sys.stderr.write(f"{PROG}: {e}\n")
            return 0
        # Before TensorFlow is imported: its pools start on these CPUs.
        R.pin(cpus)
    try:
        out = _measure(run, local, tasks)
    except Exception as e:
        if chief:  # TensorFlow puts the message's point on its last line
            lines = [line.strip() for line in str(e).splitlines() if line.strip()]
            R.write(run.out, R.failed(cell, f"{type(e).__name__}: {lines[-1] if lines else ''}"))
        raise
    if chief:
        R.write(run.out, out)
    return 0


def _measure(run: WorkerTask, local: int, tasks: dict | None) -> dict:
    from xfbench.models import get_spec

    cell = run.cell
    multi = tasks is not None
    tf, names, threads_config = start_runtime(
        cell.device, local, cell.threads_per_worker, tasks["rank"] if multi else None
    )
    # MultiWorkerMirroredStrategy must exist before any other op runs.
    strategy, backend = make_strategy(tf, names, cell.device, multi)
    if strategy.num_replicas_in_sync != cell.workers:
        raise RuntimeError(
            f"--workers {cell.workers}, but the strategy has "
            f"{strategy.num_replicas_in_sync} replicas"
        )
    trainer = Trainer(
        tf,
        strategy,
        spec=get_spec(cell.network, cell.scale),
        device=cell.device,
        precision=cell.precision,
        global_batch=cell.global_batch,
    )
    if cell.workers > 1:
        trainer.trace_local_step()  # for comm_share, traced before anything is timed
    hooks = MirroredSteps(
        trainer, tasks=tasks, local=local, backend=backend, threads_config=threads_config
    )
    return measure(run, hooks)


class MirroredSteps(Hooks):
    """The Trainer's step on this process's replicas; across processes (TF_CONFIG) the
    per-step times, the loss and threads_used are exchanged between the replicas."""

    mode = "function"
    # The first and warm-up steps start without a barrier (the timed steps have one): as
    # this worker always ran them, so that its compile_s stays comparable.
    barrier_first_steps = False
    comm_comparison = (
        f"1 - median(step traced without the gradient all-reduce, each replica updating "
        f"with its own gradient) / median(normal step), {R.COMM_PAIRS} interleaved pairs of "
        "extra steps after the timed ones, the replica check and the saved weights, slowest "
        "worker per step; the all-reduce time not hidden (TensorFlow's executor may run it "
        "beside other ops), as DDP's no_sync share"
    )

    def __init__(
        self, trainer: Trainer, *, tasks: dict | None, local: int, backend: str, threads_config
    ):
        from xfbench.adapters.tensorflow import ADAPTER

        self.trainer, self.tasks, self.multi = trainer, tasks, tasks is not None
        self.replicas_here = local
        self.backend = backend
        self.device_name = trainer.device_name()
        self.versions = ADAPTER.versions()
        self.threads_config = threads_config
        self.layout = trainer.layout
        self._loss = float("nan")

    def barrier(self) -> None:
        if self.multi:
            self.trainer.barrier()

    def step(self, local: bool = False) -> None:
        self._loss = self.trainer.step(local)

    def loss(self) -> float:
        return self._loss

    def slowest(self, seconds: list[float]) -> list[float]:
        if not self.multi:
            return seconds
        return [float(t) for t in self.trainer.gather(seconds).max(axis=0)]

    def mean(self, values: list[float]) -> list[float]:
        if not self.multi:
            return values
        return [float(v) for v in self.trainer.gather(values).mean(axis=0)]

    def replica_difference(self) -> tuple[float, float]:
        diff, scale = self.trainer.local_disagreement()
        if self.multi:
            diff = max(diff, self.trainer.cluster_disagreement())
        return diff, scale

    def save_weights(self, path: str) -> None:
        # Read on every process: under MultiWorkerMirroredStrategy reading the batch-norm
        # statistics (their mean over replicas) is a collective.
        weights = self.trainer.workload.net.weights()
        if self.tasks is None or self.tasks["chief"]:
            np.savez(path, **weights)

    def extra(self) -> dict:
        return {
            "tf32": self.trainer.tf32,
            "multi_worker": (
                {"tasks": self.tasks["tasks"], "rank": self.tasks["rank"]} if self.multi else None
            ),
        }


if __name__ == "__main__":
    sys.exit(main())
