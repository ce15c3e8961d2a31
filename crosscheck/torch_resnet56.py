"""A plain PyTorch training loop for ResNet-56, written without any xfbench code.

It is the yardstick for the harness: the suite's median for the same cell
(resnet56, batch 128, fp32, eager, same thread count) should agree with this
loop's within noise, so the harness adds nothing hidden.

    python crosscheck/torch_resnet56.py --threads 1 --steps 20
    pytest xfbench/suites/test_train.py --framework torch --model resnet56 --mode eager \
        --threads 1 --preset quick
"""

import argparse
import os
import statistics
import time

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--threads", type=int, default=1)
parser.add_argument("--steps", type=int, default=20)
parser.add_argument("--warmup", type=int, default=3)
parser.add_argument("--batch", type=int, default=128)
parser.add_argument("--channels-last", action=argparse.BooleanOptionalAction, default=True)
args = parser.parse_args()

# Threads before torch starts its pools.
for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[var] = str(args.threads)
os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[: args.threads])

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

torch.set_num_threads(args.threads)


class Block(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.b1 = nn.BatchNorm2d(cout)
        self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.b2 = nn.BatchNorm2d(cout)
        self.stride, self.extra = stride, cout - cin

    def forward(self, x):
        out = F.relu(self.b1(self.c1(x)))
        out = self.b2(self.c2(out))
        short = x
        if self.stride > 1 or self.extra:
            short = F.pad(
                x[:, :, :: self.stride, :: self.stride],
                (0, 0, 0, 0, self.extra // 2, self.extra - self.extra // 2),
            )
        return F.relu(out + short)


class ResNet56(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 16, 3, 1, 1, bias=False)
        self.bn = nn.BatchNorm2d(16)
        blocks, cin = [], 16
        for stage, cout in enumerate([16, 32, 64]):
            for b in range(9):
                blocks.append(Block(cin, cout, 2 if (b == 0 and stage > 0) else 1))
                cin = cout
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(64, 10)

    def forward(self, x):
        x = self.blocks(F.relu(self.bn(self.conv(x))))
        return self.fc(x.mean((2, 3)))


model = ResNet56()
fmt = torch.channels_last if args.channels_last else torch.contiguous_format
model = model.to(memory_format=fmt).train()
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
x = torch.randn(args.batch, 3, 32, 32).contiguous(memory_format=fmt)
y = torch.randint(0, 10, (args.batch,))

times = []
for i in range(args.warmup + args.steps):
    t0 = time.perf_counter()
    opt.zero_grad(set_to_none=True)
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    if i >= args.warmup:
        times.append(time.perf_counter() - t0)
print(
    f"plain PyTorch ResNet-56, batch {args.batch}, {args.threads} thread(s), "
    f"{'channels_last' if args.channels_last else 'channels_first'}: "
    f"median {statistics.median(times):.4f} s/step over {args.steps} steps"
)
