"""Readers for the published formats, with no pickle: MNIST's IDX files (gzip or not),
CIFAR-10's binary version, PTB's text files, and a folder of JPEGs by class.

Each checks what it reads (magic numbers, shapes, sizes, label ranges) and raises
DataError with one line naming the file; none of them executes anything from a file.
"""

from __future__ import annotations

import gzip
import struct
from collections import Counter
from pathlib import Path

import numpy as np


class DataError(Exception):
    """A data file that cannot be used; the message is one line naming it."""


# -- MNIST: IDX ------------------------------------------------------------------------
IDX_UBYTE = 0x08


def read_idx(path: Path, dims: int) -> np.ndarray:
    """An IDX file of unsigned bytes with dims dimensions, gzipped or not."""
    try:
        raw = path.read_bytes()
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
    except (OSError, EOFError, gzip.BadGzipFile) as e:
        raise DataError(f"{path}: cannot read ({type(e).__name__}: {e})") from None
    if len(raw) < 4 + 4 * dims:
        raise DataError(f"{path}: {len(raw)} bytes, too short for an IDX header")
    zero, kind, n_dims = struct.unpack(">HBB", raw[:4])
    if zero != 0 or kind != IDX_UBYTE or n_dims != dims:
        raise DataError(
            f"{path}: not an IDX file of unsigned bytes with {dims} dimensions "
            f"(magic {raw[:4].hex()}, expected 0000080{dims})"
        )
    shape = struct.unpack(f">{dims}I", raw[4 : 4 + 4 * dims])
    body = raw[4 + 4 * dims :]
    expected = int(np.prod(shape))
    if len(body) != expected:
        raise DataError(
            f"{path}: {len(body)} data bytes for shape {shape}, expected {expected} "
            "(truncated or padded)"
        )
    return np.frombuffer(body, np.uint8).reshape(shape)


MNIST_FILES = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}


def _one_of(folder: Path, name: str) -> Path:
    for candidate in (folder / name, folder / f"{name}.gz"):
        if candidate.is_file():
            return candidate
    raise DataError(f"{folder / name}[.gz]: missing")


def read_mnist(folder: Path, split: str = "train") -> tuple[np.ndarray, np.ndarray]:
    """(images float32 (N, 784) scaled to [0, 1), labels int64 (N,))."""
    images_name, labels_name = MNIST_FILES[split]
    images_path, labels_path = _one_of(folder, images_name), _one_of(folder, labels_name)
    images = read_idx(images_path, 3)
    labels = read_idx(labels_path, 1)
    if images.shape[1:] != (28, 28):
        raise DataError(f"{images_path}: images of {images.shape[1:]}, expected (28, 28)")
    if len(images) != len(labels):
        raise DataError(f"{labels_path}: {len(labels)} labels for {len(images)} images")
    if labels.size and labels.max() > 9:
        raise DataError(f"{labels_path}: label {labels.max()} outside 0-9")
    # [0, 1): 255 maps to 255/256, as the pixels "scaled to [0, 1)" of docs/models.md
    return images.reshape(len(images), 784).astype(np.float32) / 256.0, labels.astype(np.int64)


# -- CIFAR-10: binary version ----------------------------------------------------------
CIFAR_RECORD = 1 + 3 * 32 * 32
CIFAR_FILES = {"train": [f"data_batch_{i}.bin" for i in range(1, 6)], "test": ["test_batch.bin"]}


def read_cifar_file(path: Path) -> tuple[np.ndarray, np.ndarray]:
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise DataError(f"{path}: cannot read ({e.strerror or e})") from None
    if not raw or len(raw) % CIFAR_RECORD:
        raise DataError(
            f"{path}: {len(raw)} bytes, not a whole number of {CIFAR_RECORD}-byte CIFAR-10 "
            "records (truncated, or not the binary version)"
        )
    records = np.frombuffer(raw, np.uint8).reshape(-1, CIFAR_RECORD)
    labels = records[:, 0].astype(np.int64)
    if labels.max() > 9:
        raise DataError(f"{path}: label byte {labels.max()} outside 0-9 (not CIFAR-10's binary)")
    return records[:, 1:].reshape(-1, 3, 32, 32), labels


def read_cifar10(folder: Path, split: str = "train") -> tuple[np.ndarray, np.ndarray]:
    """(images uint8 (N, 3, 32, 32), labels int64 (N,)) from the batches present; the
    training split needs data_batch_1.bin at least (the others are read when there)."""
    names = CIFAR_FILES[split]
    paths = [folder / n for n in names if (folder / n).is_file()]
    if not paths or paths[0].name != names[0]:
        raise DataError(f"{folder / names[0]}: missing (CIFAR-10 binary version)")
    parts = [read_cifar_file(p) for p in paths]
    return np.concatenate([x for x, _ in parts]), np.concatenate([y for _, y in parts])


# -- PTB: text -------------------------------------------------------------------------
PTB_FILES = {"train": "ptb.train.txt", "valid": "ptb.valid.txt", "test": "ptb.test.txt"}
EOS, UNK = "<eos>", "<unk>"


def _words(path: Path) -> list[str]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DataError(f"{path}: missing") from None
    except (OSError, UnicodeDecodeError) as e:
        raise DataError(f"{path}: cannot read as UTF-8 text ({type(e).__name__})") from None
    words = []
    for line in text.splitlines():
        words += line.split() + [EOS]  # the end of each sentence is a word
    if len(words) < 2:
        raise DataError(f"{path}: no text")
    return words


def ptb_vocabulary(train_words: list[str], size: int) -> dict[str, int]:
    """The size most frequent words of the training text (ties by first appearance),
    with <unk> and <eos> always in it, numbered by frequency."""
    counts = Counter(train_words)
    ranked = sorted(counts, key=lambda w: -counts[w])  # stable: ties keep text order
    keep = [w for w in ranked if w not in (EOS, UNK)][: size - 2]
    vocab = {w: i for i, w in enumerate(sorted(keep + [EOS, UNK], key=lambda w: -counts[w]))}
    return vocab


def read_ptb(folder: Path, vocab_size: int, split: str = "train") -> np.ndarray:
    """The token ids (int64) of a split, through the training text's vocabulary."""
    train = _words(folder / PTB_FILES["train"])
    vocab = ptb_vocabulary(train, vocab_size)
    words = train if split == "train" else _words(folder / PTB_FILES[split])
    unk = vocab[UNK]
    return np.array([vocab.get(w, unk) for w in words], np.int64)


# -- ImageNet-style: a folder of JPEGs by class ----------------------------------------
JPEG_SUFFIXES = (".jpg", ".jpeg", ".JPEG", ".JPG")


def list_jpeg_folder(folder: Path, classes: int) -> tuple[list[Path], np.ndarray]:
    """The JPEGs under folder/<class>/ (classes in sorted order, labelled 0, 1, ...)."""
    if not folder.is_dir():
        raise DataError(f"{folder}: missing (a folder of JPEGs by class)")
    class_dirs = sorted(p for p in folder.iterdir() if p.is_dir())
    if not class_dirs:
        raise DataError(f"{folder}: no class folders")
    if len(class_dirs) > classes:
        raise DataError(f"{folder}: {len(class_dirs)} class folders, the network has {classes}")
    paths, labels = [], []
    for label, d in enumerate(class_dirs):
        for f in sorted(d.iterdir()):
            if f.suffix in JPEG_SUFFIXES:
                paths.append(f)
                labels.append(label)
    if not paths:
        raise DataError(f"{folder}: no .jpg files in its class folders")
    return paths, np.array(labels, np.int64)


JPEG_TAIL = 64  # bytes read from a JPEG's end: its end-of-image marker, maybe zero padding


def check_jpeg(path: Path) -> None:
    """A JPEG's start-of-image and end-of-image markers (a truncated file lacks the end).
    Only the first 3 and last JPEG_TAIL bytes are read: ImageNet's training set is
    1.28 million files and about 140 GB, checked before every cell."""
    try:
        with open(path, "rb") as f:
            head = f.read(3)
            size = f.seek(0, 2)
            f.seek(max(0, size - JPEG_TAIL))
            tail = f.read()
    except OSError as e:
        raise DataError(f"{path}: cannot read ({e.strerror or e})") from None
    if head != b"\xff\xd8\xff":
        raise DataError(f"{path}: not a JPEG (no start-of-image marker)")
    if tail.rstrip(b"\x00")[-2:] != b"\xff\xd9":
        raise DataError(f"{path}: truncated JPEG (no end-of-image marker)")


def one_line(message: str) -> str:
    """A DataError's message as one line. An error raised in a loader's worker process
    comes back with the worker's traceback inside its message (PyTorch's DataLoader):
    its last DataError line is the original one."""
    lines = [line for line in message.strip().splitlines() if line.strip()]
    for line in reversed(lines):
        if "DataError: " in line:
            return line.split("DataError: ", 1)[1].strip()
    return lines[-1].strip() if lines else message
