"""TensorFlow's own input pipeline for --data real: tf.data, with the decoding and
augmentation as TensorFlow ops in a parallel map (JPEG: read, decode, a random resized
crop from sample_distorted_bounding_box, flip, normalise), then batch and prefetch. Batches
follow the shared seeded order (data/sources.py) and come out in the layout the network
computes in (NHWC for channels_last)."""

from __future__ import annotations

import numpy as np

from xfbench.data.sources import (
    CIFAR_MEAN,
    CIFAR_STD,
    IMAGENET_MEAN,
    IMAGENET_STD,
    Source,
    batches_of_indices,
)


def batches(src: Source, batch: int, seed: int, workers: int, channels_last: bool):
    """An endless iterator of (x, y) tensors on the host."""
    import tensorflow as tf

    indices = tf.data.Dataset.from_generator(
        lambda: batches_of_indices(len(src), batch, seed),
        output_signature=tf.TensorSpec((batch,), tf.int64),
    )
    parallel = workers or None  # None: sequential, as a DataLoader with no workers
    tf.random.set_seed(seed)

    def to_layout(x):  # x: (N, H, W, C) images
        return x if channels_last else tf.transpose(x, (0, 3, 1, 2))

    if src.dataset == "imagenet":
        paths = tf.constant([str(p) for p in src.paths])
        labels = tf.constant(src.labels)
        height, width = src.size[1:]
        mean, std = tf.constant(IMAGENET_MEAN), tf.constant(IMAGENET_STD)

        def one(i):
            image = tf.io.decode_jpeg(tf.io.read_file(paths[i]), channels=3)
            begin, size, _ = tf.image.sample_distorted_bounding_box(
                tf.shape(image),
                bounding_boxes=tf.zeros((1, 0, 4)),
                area_range=(0.08, 1.0),
                aspect_ratio_range=(3 / 4, 4 / 3),
                max_attempts=10,
                use_image_if_no_bounding_boxes=True,
            )
            image = tf.slice(image, begin, size)
            image = tf.image.resize(image, (height, width)) / 255.0
            image = tf.image.random_flip_left_right(image)
            return (image - mean) / std, labels[i]

        data = (
            indices.unbatch()
            .map(one, num_parallel_calls=parallel)
            .batch(batch)
            .map(lambda x, y: (to_layout(x), y))
        )
    elif src.dataset == "ptb":
        ids = tf.constant(src.x)
        window = tf.range(src.window, dtype=tf.int64)

        def windows(idx):
            starts = idx[:, None] * src.window + window[None, :]
            return tf.gather(ids, starts), tf.gather(ids, starts + 1)

        data = indices.map(windows, num_parallel_calls=parallel)
    elif src.dataset == "cifar10":
        images = tf.constant(np.ascontiguousarray(src.x.transpose(0, 2, 3, 1)))  # NHWC
        labels = tf.constant(src.y)
        mean, std = tf.constant(CIFAR_MEAN), tf.constant(CIFAR_STD)

        def cifar(idx):
            x = tf.cast(tf.gather(images, idx), tf.float32) / 255.0
            flip = tf.random.uniform((tf.shape(idx)[0], 1, 1, 1)) < 0.5
            x = tf.where(flip, tf.reverse(x, axis=[2]), x)
            return to_layout((x - mean) / std), tf.gather(labels, idx)

        data = indices.map(cifar, num_parallel_calls=parallel)
    else:  # mnist: flat pixels in [0, 1)
        images, labels = tf.constant(src.x), tf.constant(src.y)
        data = indices.map(
            lambda idx: (tf.gather(images, idx), tf.gather(labels, idx)),
            num_parallel_calls=parallel,
        )
    return iter(data.prefetch(tf.data.AUTOTUNE))
