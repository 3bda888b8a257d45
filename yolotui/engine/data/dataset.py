"""YoloDataset: checked images and labels -> augmented (train) or letterboxed (val) samples.

Each sample is a pure function of (seed, epoch, index): its randomness comes from a numpy Generator
seeded with exactly those numbers, never from global RNG state, so worker count, worker order and the
batch an epoch was resumed at cannot change it. `set_epoch(epoch, mosaic)` must be called before each
epoch's iteration (workers are started per epoch and copy the dataset then); passing the mosaic flag
explicitly is what keeps close_mosaic right on a resumed run.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import cv2
import numpy as np
import torch
from torch.utils.data import Dataset

from yolotui.datasets import CheckReport, DataConfig, check_labels, list_images
from yolotui.engine.data.augment import (
    AUGMENT_DEFAULTS,
    affine_matrix,
    augment_hsv,
    letterbox,
    mixup,
    mosaic_canvas,
    random_affine,
    source_region,
    warp_boxes,
    warp_image,
    xywhn_to_xyxy,
    xyxy_to_xywhn,
)
from yolotui.engine.data.diskcache import array_path, load_array, prepare_disk_cache
from yolotui.errors import UserError

_SAMPLE_STREAM = 0x5A3  # tells sample generators apart from the sampler's
RECENT_IMAGES_BYTES = 256 << 20  # decoded images an augmenting data set keeps per process without --cache


def rect_batches(shapes_hw: Sequence[tuple[int, int]], batch_size: int, imgsz: int, stride: int,
                 pad: float = 0.5) -> tuple[np.ndarray, np.ndarray]:
    """Rectangular batches as the official validator builds them.

    Images are ordered by aspect ratio (h / w, numpy's default argsort, so ties fall as they do there) and
    cut into batches of `batch_size`; each batch gets one (h, w) shape: the long side `imgsz`, the short
    side just large enough for the batch's most extreme aspect, plus `pad` strides, rounded up to a stride
    multiple. Returns (order: original index of each position, batch_shapes [batches, 2] as (h, w)).
    """
    hw = np.asarray(shapes_hw, dtype=np.float64).reshape(-1, 2)
    aspect = hw[:, 0] / hw[:, 1]
    order = aspect.argsort()
    aspect = aspect[order]
    batch_of = np.floor(np.arange(len(hw)) / batch_size).astype(int)
    shapes = []
    for b in range(int(batch_of[-1]) + 1 if len(hw) else 0):
        group = aspect[batch_of == b]
        low, high = group.min(), group.max()
        shapes.append([high, 1] if high < 1 else [1, 1 / low] if low > 1 else [1, 1])
    batch_shapes = np.ceil(np.array(shapes, dtype=np.float64).reshape(-1, 2) * imgsz / stride + pad).astype(int)
    return order, batch_shapes * stride


def sample_rng(seed: int, epoch: int, index: int) -> np.random.Generator:
    """The Generator that drives every random choice of sample `index` in `epoch`."""
    return np.random.default_rng([int(seed) & 0xFFFFFFFFFFFF, int(epoch), int(index), _SAMPLE_STREAM])


def _image_shape_or_error(path: str) -> tuple[int, int]:
    from yolotui.datasets.check import _image_shape

    try:
        return _image_shape(path)
    except ValueError as exc:
        raise UserError(f"{path}: {exc}; run `yolotui check-data`") from None


class YoloDataset(Dataset):
    """Images and labels of one split, with the official augmentation when `augment` is on.

    items: a CheckReport (its usable images) or a sequence of (image path, labels [n, 5] normalised).
    hyp: augmentation keys of hyp.scratch-high.yaml (missing keys take the official values).
    cache: None; 'ram' to decode and resize every image once, up front, into memory; 'disk' to keep each decoded
    and resized image as an array beside the data set (yolotui/engine/data/diskcache.py), written once. Without a
    cache, an augmenting data set keeps the most recently decoded images (RECENT_IMAGES_BYTES per process), as
    mosaics read each image several times an epoch.
    rect (validation only): reorder the images by aspect ratio and letterbox each batch of `batch_size` into
    its own stride-multiple rectangle with `pad` strides of margin, as the official validator does; a loader
    over it must then be unshuffled with the same batch size. `shapes` are the images' (h, w), read from the
    files when not given (a CheckReport brings them).
    A sample is (img uint8 [3, S, S] RGB, labels float [n, 5] (cls, cx, cy, w, h normalised), path,
    (h0, w0), ratio_pad ((ratio_h, ratio_w), (pad_w, pad_h)) or None for a mosaic, index). The image tensor is a
    channel-first view of height-width-channel memory (the model's channels_last layout), so no transposing copy
    is made; `dataset[(epoch, mosaic, index)]` reads a sample of that epoch whatever `set_epoch` last chose (the
    loader's sampler tags indices so, which lets its worker processes live across epochs).
    """

    def __init__(self, items: CheckReport | Sequence[tuple[str, np.ndarray]], imgsz: int = 640,
                 augment: bool = False, hyp: dict[str, Any] | None = None, seed: int = 0,
                 cache: str | None = None, stride: int = 32, rect: bool = False, batch_size: int = 32,
                 pad: float = 0.5, shapes: Sequence[tuple[int, int]] | None = None) -> None:
        pairs = items.usable if isinstance(items, CheckReport) else list(items)
        if isinstance(items, CheckReport) and shapes is None and len(items.shapes) == len(pairs):
            shapes = items.shapes
        if not pairs:
            raise UserError("no usable image in this data set; run `yolotui check-data` to see why")
        if imgsz % stride:
            raise UserError(f"image size {imgsz} is not a multiple of the model stride {stride}; use "
                            f"{(imgsz // stride + 1) * stride}")
        if cache is True:  # `--cache` given without a value, as in the official trainer
            cache = "ram"
        if cache not in (None, False, "", "none", "ram", "disk"):
            raise UserError(f"--cache {cache}: choose ram or disk (or leave --cache out)")
        self.paths = [str(p) for p, _ in pairs]
        self.labels = [np.asarray(lb, dtype=np.float32).reshape(-1, 5) for _, lb in pairs]
        self.imgsz = int(imgsz)
        self.augment = bool(augment)
        self.hyp = {**AUGMENT_DEFAULTS, **{k: float(v) for k, v in (hyp or {}).items() if k in AUGMENT_DEFAULTS}}
        self.seed = int(seed)
        self.stride = stride
        self.epoch = 0
        self.mosaic = self.augment
        self.rect = bool(rect) and not self.augment
        self.batch_size = max(1, int(batch_size))
        self.batch_shapes: np.ndarray | None = None
        if self.rect:
            if shapes is None or len(shapes) != len(self.paths):
                shapes = [_image_shape_or_error(p) for p in self.paths]
            order, self.batch_shapes = rect_batches(shapes, self.batch_size, self.imgsz, stride, pad)
            self.paths = [self.paths[i] for i in order]
            self.labels = [self.labels[i] for i in order]
        self._ram: list[tuple[np.ndarray, tuple[int, int]]] | None = None
        self._disk_shapes: list[tuple[int, int]] | None = None
        self._recent: OrderedDict[int, tuple[np.ndarray, tuple[int, int]]] = OrderedDict()
        self._recent_max = RECENT_IMAGES_BYTES // (3 * self.imgsz * self.imgsz) if self.augment else 0
        if cache == "ram":
            self.cache_ram()
        elif cache == "disk":
            self.cache_disk()

    @classmethod
    def from_config(cls, config: DataConfig, split: str, min_items: int = 0, **kwargs: Any) -> YoloDataset:
        """Check the labels of `config`'s `split` (cached) and build a dataset of its usable images."""
        report = check_labels(list_images(config.split(split)), config.nc, min_items=min_items)
        report.require_usable(f"{config.yaml_path} '{split}'")
        return cls(report, **kwargs)

    def __len__(self) -> int:
        return len(self.paths)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_recent"] = OrderedDict()  # a pickled copy (spawned worker) starts with an empty buffer
        return state

    def set_epoch(self, epoch: int, mosaic: bool = True) -> None:
        """Select the epoch (it seeds every sample) and whether mosaic is on (off for close_mosaic)."""
        self.epoch = int(epoch)
        self.mosaic = bool(mosaic) and self.augment

    def cache_ram(self) -> None:
        """Decode and resize every image once into memory (`--cache ram`)."""
        with ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 1)) as pool:
            self._ram = [(_read_only(im), shape0) for im, shape0 in pool.map(self._read_resized, range(len(self)))]

    def cache_disk(self) -> None:
        """Write the decoded, resized images the disk cache lacks (`--cache disk`); later reads load them."""
        self._disk_shapes = prepare_disk_cache(self.paths, self.imgsz, self._linear_resize, self._read_resized,
                                              workers=min(8, os.cpu_count() or 1))

    @property
    def _linear_resize(self) -> bool:
        return self.augment  # validation shrinks with INTER_AREA (enlarging is always linear)

    def _resized_shape(self, shape0: tuple[int, int]) -> tuple[int, int]:
        h0, w0 = shape0
        ratio = self.imgsz / max(h0, w0)
        return (h0, w0) if ratio == 1 else (max(1, int(h0 * ratio)), max(1, int(w0 * ratio)))

    def _from_disk(self, index: int) -> tuple[np.ndarray, tuple[int, int]] | None:
        shape0 = self._disk_shapes[index]
        path = array_path(self.paths[index], self.imgsz, self._linear_resize)
        im = load_array(path, self._resized_shape(shape0))
        return None if im is None else (im, shape0)

    def _read_resized(self, index: int) -> tuple[np.ndarray, tuple[int, int]]:
        path = self.paths[index]
        im = cv2.imread(path, cv2.IMREAD_COLOR)
        if im is None:
            raise UserError(f"{path}: cannot read image (changed since the label check?); run "
                            "`yolotui check-data` again")
        h0, w0 = im.shape[:2]
        ratio = self.imgsz / max(h0, w0)
        if ratio != 1:
            interp = cv2.INTER_LINEAR if (self._linear_resize or ratio > 1) else cv2.INTER_AREA
            im = cv2.resize(im, (max(1, int(w0 * ratio)), max(1, int(h0 * ratio))), interpolation=interp)
        return im, (h0, w0)

    def load_image(self, index: int) -> tuple[np.ndarray, tuple[int, int]]:
        """The image resized so its long side is imgsz (BGR, read-only: callers write into new arrays), and its
        original (h0, w0)."""
        if self._ram is not None:
            return self._ram[index]
        if self._disk_shapes is not None:
            cached = self._from_disk(index)
            if cached is not None:
                return cached
        recent = self._recent.get(index)
        if recent is not None:
            self._recent.move_to_end(index)
            return recent
        im, shape0 = self._read_resized(index)
        loaded = (_read_only(im), shape0)
        if self._recent_max:
            self._recent[index] = loaded
            if len(self._recent) > self._recent_max:
                self._recent.popitem(last=False)
        return loaded

    def _mosaic(self, index: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, tuple[int, int]]:
        size = self.imgsz
        centre = (int(rng.uniform(size // 2, 2 * size - size // 2)), int(rng.uniform(size // 2, 2 * size - size // 2)))
        picks = [index, *rng.integers(0, len(self), 3).tolist()]
        picks = [picks[i] for i in rng.permutation(4)]
        loaded = {i: self.load_image(i) for i in set(picks)}
        hyp = self.hyp
        # The 2*size canvas is warped and cut back to size; only the part of it the warp reads is built.
        side, perspective = 2 * size, bool(hyp["perspective"])
        matrix, gain = affine_matrix(rng, (side, side), (size, size), hyp["degrees"], hyp["translate"], hyp["scale"],
                                     hyp["shear"], hyp["perspective"])
        region = (0, 0, side, side) if perspective else source_region(matrix, (size, size), (side, side))
        canvas, boxes = mosaic_canvas([(loaded[i][0], self.labels[i]) for i in picks], size, centre, region)
        img = warp_image(canvas, matrix, (size, size), perspective, offset=region[:2])
        return img, warp_boxes(boxes, matrix, gain, (size, size), perspective), loaded[index][1]

    def __getitem__(self, key: int | tuple[int, bool, int]):
        if isinstance(key, tuple):  # (epoch, mosaic, index) from a tagging sampler
            epoch, mosaic, index = int(key[0]), bool(key[1]) and self.augment, int(key[2])
        else:
            epoch, mosaic, index = self.epoch, self.mosaic, int(key)
        rng = sample_rng(self.seed, epoch, index)
        hyp = self.hyp
        ratio_pad = None
        # Always draw, so that mosaic switched off equals hyp mosaic=0 and later draws do not shift.
        use_mosaic = rng.random() < hyp["mosaic"]
        if mosaic and use_mosaic:
            img, boxes, shape0 = self._mosaic(index, rng)
            if rng.random() < hyp["mixup"]:
                other_img, other_boxes, _ = self._mosaic(int(rng.integers(0, len(self))), rng)
                img, boxes = mixup(img, boxes, other_img, other_boxes, rng)
        else:
            im, shape0 = self.load_image(index)
            h, w = im.shape[:2]
            target = self.imgsz if self.batch_shapes is None else self.batch_shapes[index // self.batch_size]
            img, ratio, (pad_w, pad_h) = letterbox(im, target, scaleup=self.augment)
            ratio_pad = ((h * ratio / shape0[0], w * ratio / shape0[1]), (pad_w, pad_h))
            boxes = xywhn_to_xyxy(self.labels[index], w * ratio, h * ratio, pad_w, pad_h)
            if self.augment:
                img, boxes = random_affine(img, boxes, rng, hyp["degrees"], hyp["translate"], hyp["scale"],
                                           hyp["shear"], hyp["perspective"])
        labels = xyxy_to_xywhn(boxes, img.shape[1], img.shape[0])
        if not img.flags.writeable or not img.flags.c_contiguous:  # never write into a cached image
            img = np.array(img, order="C", copy=True)
        if self.augment:
            augment_hsv(img, rng, hyp["hsv_h"], hyp["hsv_s"], hyp["hsv_v"], to_rgb=True)  # BGR in, RGB out
            if rng.random() < hyp["flipud"]:
                img = cv2.flip(img, 0)
                labels[:, 2] = 1 - labels[:, 2]
            if rng.random() < hyp["fliplr"]:
                img = cv2.flip(img, 1)
                labels[:, 1] = 1 - labels[:, 1]
        else:
            cv2.cvtColor(img, cv2.COLOR_BGR2RGB, dst=img)
        chw = torch.from_numpy(img).permute(2, 0, 1)  # HWC RGB memory seen as CHW: no copy
        return (chw, torch.from_numpy(labels.astype(np.float32)).reshape(-1, 5),
                self.paths[index], tuple(shape0), ratio_pad, int(index))


def _read_only(im: np.ndarray) -> np.ndarray:
    """`im` marked read-only: cached images are shared by every later sample and must never be written."""
    im.setflags(write=False)
    return im
