"""Which data set each network trains on, where its files are under --data-dir, and one
sample as every framework's pipeline gets it.

Layout under --data-dir (nothing is downloaded at run time; docs/data.md says where to
get each):
    mnist/      train-images-idx3-ubyte[.gz], train-labels-idx1-ubyte[.gz]
    cifar10/    data_batch_1.bin ... data_batch_5.bin (the binary version)
    ptb/        ptb.train.txt, ptb.valid.txt, ptb.test.txt
    imagenet/   train/<class>/*.jpg

The order of samples is the same in every framework: order(n, seed, epoch) is a seeded
permutation each epoch, and every pipeline takes its batches in that order. Random
augmentation (crop, flip) draws from each framework's own generator.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from xfbench.data import readers
from xfbench.data.readers import DataError

# network -> data set; FCN-5 and FCN-8 have none (the paper ran them on synthetic data)
DATASET = {
    "fcn_r": "mnist",
    "alexnet_r": "cifar10",
    "resnet56": "cifar10",
    "alexnet": "imagenet",
    "resnet50": "imagenet",
    "lstm32": "ptb",
    "lstm64": "ptb",
}
WHERE = {
    "mnist": "the four IDX files from the MNIST database (yann.lecun.com/exdb/mnist, or a "
    "mirror such as ossci-datasets.s3.amazonaws.com/mnist)",
    "cifar10": "cifar-10-binary.tar.gz from www.cs.toronto.edu/~kriz/cifar.html, unpacked "
    "(the binary version, never the python one)",
    "ptb": "ptb.train.txt, ptb.valid.txt and ptb.test.txt (Mikolov's simple-examples data)",
    "imagenet": "ImageNet's training images (image-net.org) or any folder of JPEGs by class, "
    "as train/<class>/*.jpg",
}
# Per-channel mean and standard deviation for normalising (ImageNet's and CIFAR-10's usual).
IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
CIFAR_MEAN, CIFAR_STD = (0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)


def order(n: int, seed: int, epoch: int) -> np.ndarray:
    """The sample order of one epoch, the same for every framework."""
    return np.random.default_rng([seed, 7, epoch]).permutation(n)


@dataclass
class Source:
    """One data set, read and checked, for one network."""

    dataset: str
    network: str
    x: np.ndarray | None  # array data sets: every sample (canonical layout)
    y: np.ndarray | None
    size: tuple[int, ...]  # the network's input shape
    paths: list[Path] = field(default_factory=list)  # imagenet: one JPEG per sample
    labels: np.ndarray | None = None
    window: int = 0  # ptb: tokens per sample

    def __len__(self) -> int:
        if self.dataset == "imagenet":
            return len(self.paths)
        if self.dataset == "ptb":
            return (len(self.x) - 1) // self.window
        return len(self.x)

    def label(self, i: int):
        if self.dataset == "imagenet":
            return self.labels[i]
        if self.dataset == "ptb":
            return self.x[i * self.window + 1 : (i + 1) * self.window + 1]
        return self.y[i]


def source_for(spec, data_dir: str | Path) -> Source:
    """The checked data set of a network under data_dir; DataError names what is wrong."""
    dataset = DATASET.get(spec.id)
    if dataset is None:
        raise DataError(f"{spec.id} has no real data set (the paper ran it on synthetic data only)")
    root = Path(data_dir) / dataset
    if dataset == "mnist":
        x, y = readers.read_mnist(root)
        return Source(dataset=dataset, network=spec.id, x=x, y=y, size=spec.input_shape)
    if dataset == "cifar10":
        x, y = readers.read_cifar10(root)
        return Source(dataset=dataset, network=spec.id, x=x, y=y, size=spec.input_shape)
    if dataset == "ptb":
        ids = readers.read_ptb(root, spec.vocab)
        window = spec.input_shape[0]
        if len(ids) < window + 1:
            raise DataError(f"{root / readers.PTB_FILES['train']}: fewer than {window + 1} words")
        return Source(
            dataset=dataset, network=spec.id, x=ids, y=None, size=spec.input_shape, window=window
        )
    paths, labels = readers.list_jpeg_folder(root / "train", spec.classes)
    for p in paths:
        readers.check_jpeg(p)
    return Source(
        dataset=dataset,
        network=spec.id,
        x=None,
        y=None,
        size=spec.input_shape,
        paths=paths,
        labels=labels,
    )


# -- one sample, in numpy (the PyTorch and JAX pipelines; TensorFlow's maps its own ops) --
def decode_crop(path: Path, size: tuple[int, int], rng: np.random.Generator) -> np.ndarray:
    """A JPEG decoded, randomly resized-cropped to size (scale 0.08-1 of the area, aspect
    3/4-4/3, as the ImageNet recipes do), randomly flipped, normalised: float32 (3, H, W)."""
    from PIL import Image

    try:
        with Image.open(path) as im:
            im = im.convert("RGB")
            w, h = im.size
            for _ in range(10):
                area = w * h * rng.uniform(0.08, 1.0)
                aspect = np.exp(rng.uniform(np.log(3 / 4), np.log(4 / 3)))
                cw, ch = int(round(np.sqrt(area * aspect))), int(round(np.sqrt(area / aspect)))
                if 0 < cw <= w and 0 < ch <= h:
                    left, top = rng.integers(0, w - cw + 1), rng.integers(0, h - ch + 1)
                    break
            else:  # the whole image, as the recipes fall back to
                left, top, cw, ch = 0, 0, w, h
            im = im.resize((size[1], size[0]), Image.BILINEAR, box=(left, top, left + cw, top + ch))
            a = np.asarray(im, np.float32) / 255.0
    except (OSError, ValueError) as e:
        raise DataError(f"{path}: cannot decode ({type(e).__name__}: {e})") from None
    if rng.random() < 0.5:
        a = a[:, ::-1]
    a = (a - np.array(IMAGENET_MEAN, np.float32)) / np.array(IMAGENET_STD, np.float32)
    return np.ascontiguousarray(a.transpose(2, 0, 1))


def sample(src: Source, i: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Sample i as the network takes it (the synthetic batch's layout, one row)."""
    if src.dataset == "imagenet":
        return decode_crop(src.paths[i], src.size[1:], rng), src.labels[i]
    if src.dataset == "cifar10":
        a = src.x[i].astype(np.float32) / 255.0
        if rng.random() < 0.5:
            a = a[:, :, ::-1]
        mean = np.array(CIFAR_MEAN, np.float32)[:, None, None]
        std = np.array(CIFAR_STD, np.float32)[:, None, None]
        return np.ascontiguousarray((a - mean) / std), src.y[i]
    if src.dataset == "ptb":
        start = i * src.window
        return src.x[start : start + src.window], src.x[start + 1 : start + src.window + 1]
    return src.x[i], src.y[i]


def batches_of_indices(n: int, batch: int, seed: int):
    """Index batches forever, epoch after epoch, each in order(n, seed, epoch); a last
    partial batch of an epoch is dropped (every step sees a whole mini-batch)."""
    if n < batch:
        raise DataError(f"{n} samples, fewer than one mini-batch of {batch}")
    epoch = 0
    while True:
        idx = order(n, seed, epoch)
        for start in range(0, n - batch + 1, batch):
            yield idx[start : start + batch]
        epoch += 1
