"""Stand-in for the official train_dual.py (see README.md in this folder): same flags and outputs, no model."""

import argparse
import os
import sys
import time
from datetime import datetime
from pathlib import Path

import numpy as np
import torch
import yaml

ROOT = Path(__file__).resolve().parent
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))

from models.yolo import DetectionModel  # noqa: E402
from utils.callbacks import Callbacks  # noqa: E402
from utils.general import LOGGER, increment_path, strip_optimizer, yaml_save  # noqa: E402

KEYS = ["train/box_loss", "train/cls_loss", "train/dfl_loss", "metrics/precision", "metrics/recall",
        "metrics/mAP_0.5", "metrics/mAP_0.5:0.95", "val/box_loss", "val/cls_loss", "val/dfl_loss",
        "x/lr0", "x/lr1", "x/lr2"]


class CsvLogger:
    """Appends results.csv rows on on_fit_epoch_end, registered inside train() as the official Loggers are."""

    def __init__(self, save_dir):
        self.file = Path(save_dir) / "results.csv"

    def on_fit_epoch_end(self, vals, epoch, best_fitness, fi):
        head = "" if self.file.exists() else ",".join("%20s" % k for k in ["epoch"] + KEYS) + "\n"
        with open(self.file, "a") as handle:
            handle.write(head + ",".join("%20.5g" % v for v in [epoch] + list(vals)) + "\n")


def smart_resume(ckpt, weights, epochs):
    start_epoch = ckpt["epoch"] + 1
    assert start_epoch > 0, f"{weights} training to {epochs} epochs is finished, nothing to resume."
    LOGGER.info(f"Resuming training from {weights} from epoch {start_epoch} to {epochs} total epochs")
    return float(ckpt["best_fitness"][0]), start_epoch


def train(hyp, opt, device, callbacks):
    save_dir, epochs, batch_size = Path(opt.save_dir), opt.epochs, opt.batch_size
    callbacks.run("on_pretrain_routine_start")
    w = save_dir / "weights"
    w.mkdir(parents=True, exist_ok=True)
    last, best = w / "last.pt", w / "best.pt"
    if isinstance(hyp, str):
        with open(hyp) as handle:
            hyp = yaml.safe_load(handle)
    hyp["anchor_t"] = 5.0
    opt.hyp = hyp.copy()
    yaml_save(save_dir / "hyp.yaml", hyp)
    yaml_save(save_dir / "opt.yaml", vars(opt))
    callbacks.register_action("on_fit_epoch_end", callback=CsvLogger(save_dir).on_fit_epoch_end)
    if opt.resume:
        hyp = opt.hyp  # as the official code does on resume: label_smoothing then lands in the checkpoint's opt
    if opt.data and not Path(opt.data).exists():
        raise FileNotFoundError(f"Dataset not found: {opt.data}")
    limit = int(os.environ.get("STANDIN_OOM_ABOVE", "0") or 0)
    oom_epoch = int(os.environ.get("STANDIN_OOM_EPOCH", "0") or 0)
    crash_marker = os.environ.get("STANDIN_CRASH_ONCE")
    crash_epoch = int(os.environ.get("STANDIN_CRASH_EPOCH", "1") or 1)
    model = DetectionModel()
    optimizer = torch.optim.SGD(model.parameters(), lr=hyp.get("lr0", 0.01))
    start_epoch, best_fitness = 0, 0.0
    if opt.weights:
        ckpt = torch.load(opt.weights, map_location="cpu")  # torch's default weights_only, as the official code
        model.load_state_dict(ckpt["model"].float().state_dict())
        if opt.resume:
            optimizer.load_state_dict(ckpt["optimizer"])
            best_fitness, start_epoch = smart_resume(ckpt, opt.weights, epochs)
    callbacks.run("on_pretrain_routine_end", [], {})
    hyp["label_smoothing"] = opt.label_smoothing
    nb = int(os.environ.get("STANDIN_BATCHES", "4"))
    pause = float(os.environ.get("STANDIN_BATCH_S", "0.01"))
    t0 = time.time()
    callbacks.run("on_train_start")
    LOGGER.info(f"Logging results to {save_dir}\nStarting training for {epochs} epochs...")
    for epoch in range(start_epoch, epochs):
        callbacks.run("on_train_epoch_start")
        if limit and batch_size > limit and epoch >= oom_epoch:
            raise RuntimeError(f"CUDA out of memory. Tried to allocate 20.00 MiB (batch {batch_size})")
        mloss = torch.zeros(3)
        for i in range(nb):
            callbacks.run("on_train_batch_start")
            ni = i + nb * epoch
            loss_items = torch.tensor([1.0, 2.0, 3.0]) / (1 + epoch + i / nb)
            mloss = (mloss * i + loss_items) / (i + 1)
            time.sleep(pause)
            sys.stdout.write(f"\r{epoch}/{epochs - 1}  {i + 1}/{nb} {'#' * (i + 1)}")
            sys.stdout.flush()
            callbacks.run("on_train_batch_end", model, ni, torch.zeros(batch_size, 3, 8, 8), None, [], list(mloss))
        sys.stdout.write("\n")
        lr = [x["lr"] for x in optimizer.param_groups] * 3
        callbacks.run("on_train_epoch_end", epoch=epoch)
        m = 1 - 1 / (2 + epoch)
        results = (m, m, m * 0.9, m * 0.6, 0.5, 0.4, 0.3)
        fi = np.array([0.1 * results[2] + 0.9 * results[3]])
        if fi[0] > best_fitness:
            best_fitness = float(fi[0])
        log_vals = list(mloss) + list(results) + lr
        callbacks.run("on_fit_epoch_end", log_vals, epoch, np.array([best_fitness]), fi)
        if crash_marker and epoch == crash_epoch and not os.path.exists(crash_marker):
            open(crash_marker, "w").close()  # once: the row of this epoch is written, its checkpoint is not
            raise RuntimeError("stand-in crash after the results row, before the checkpoint")
        final_epoch = epoch + 1 == epochs
        ckpt = {"epoch": epoch, "best_fitness": np.array([best_fitness]), "model": DetectionModel().half(),
                "ema": DetectionModel().half(), "updates": ni, "optimizer": optimizer.state_dict(),
                "opt": vars(opt), "git": {}, "date": datetime.now().isoformat()}
        ckpt["model"].load_state_dict(model.half().state_dict())
        model.float()
        torch.save(ckpt, last)
        if best_fitness == fi[0]:
            torch.save(ckpt, best)
        callbacks.run("on_model_save", last, epoch, final_epoch, best_fitness, fi)
    LOGGER.info(f"\n{epoch - start_epoch + 1} epochs completed in {(time.time() - t0) / 3600:.3f} hours.")
    if os.environ.get("STANDIN_FAIL_AFTER"):
        raise RuntimeError("stand-in failure after training (as a plotting or final-val step can fail)")
    for f in last, best:
        if f.exists():
            strip_optimizer(f)
    callbacks.run("on_train_end", last, best, epoch, results)
    return results


def parse_opt():
    parser = argparse.ArgumentParser()
    parser.add_argument("--weights", type=str, default="")
    parser.add_argument("--cfg", type=str, default="yolo.yaml")
    parser.add_argument("--data", type=str, default="")
    parser.add_argument("--hyp", type=str, default=str(ROOT / "data/hyps/hyp.scratch-high.yaml"))
    parser.add_argument("--epochs", type=int, default=100)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--imgsz", "--img", "--img-size", type=int, default=640)
    parser.add_argument("--resume", nargs="?", const=True, default=False)
    parser.add_argument("--nosave", action="store_true")
    parser.add_argument("--noval", action="store_true")
    parser.add_argument("--noplots", action="store_true")
    parser.add_argument("--device", default="")
    parser.add_argument("--optimizer", type=str, default="SGD")
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--project", default=ROOT / "runs/train")
    parser.add_argument("--name", default="exp")
    parser.add_argument("--exist-ok", action="store_true")
    parser.add_argument("--label-smoothing", type=float, default=0.0)
    parser.add_argument("--patience", type=int, default=100)
    parser.add_argument("--freeze", nargs="+", type=int, default=[0])
    parser.add_argument("--save-period", type=int, default=-1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--close-mosaic", type=int, default=0)
    return parser.parse_args()


def main(opt, callbacks=Callbacks()):
    if opt.resume:
        last = Path(opt.resume)
        assert last.is_file(), f"ERROR: --resume checkpoint {last} does not exist"
        with open(last.parent.parent / "opt.yaml") as handle:
            d = yaml.safe_load(handle)
        opt = argparse.Namespace(**d)
        opt.cfg, opt.weights, opt.resume = "", str(last), True
    else:
        assert opt.cfg or opt.weights, "either --cfg or --weights must be specified"
        opt.project = str(opt.project)
        opt.save_dir = str(increment_path(Path(opt.project) / opt.name, exist_ok=opt.exist_ok))
    train(opt.hyp, opt, "cpu", callbacks)


if __name__ == "__main__":
    main(parse_opt())
