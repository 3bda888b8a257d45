#!/usr/bin/env bash
# One-command GPU check of the yolotui engine (run on a machine with an NVIDIA GPU, from the repository root):
#   bash bench/gpu_check.sh
# 1. AMP: a few training steps of gelan-t under autocast + GradScaler, loss finite, and img/s fp32 vs AMP;
# 2. channels_last: eval outputs agree with the contiguous model, and step img/s of each format;
# 3. cudnn.benchmark: step img/s with it off and on;
# 3b. --compile: step img/s of gelan-t and yolov9-t under AMP, eager vs torch.compile (yolotui's TrainingForward:
#     trial step, then compiled), the compile time, and the first compiled loss against the eager one;
# 3c. the training loader feeding the GPU: bench/bench_loader.py --device cuda (side by side with ultralytics'
#     loader when ultralytics is importable; skipped otherwise);
# 4. DDP: when 2+ GPUs are present, a 1-epoch `yolotui train --device 0,1` on demo data must finish;
# 5. NVML: yolotui's GPU telemetry readings next to nvidia-smi's (memory, utilisation, power, temperature).
# Exits non-zero on the first failed check. Knobs: PYTHON (default python), IMGSZ (320), BATCH (16), STEPS (10),
# COMPILE_CFGS ("gelan-t yolov9-t"; empty skips 3b), LOADER_WORKERS (8).
set -euo pipefail
PYTHON=${PYTHON:-python}
IMGSZ=${IMGSZ:-320}
BATCH=${BATCH:-16}
STEPS=${STEPS:-10}
WORK=$(mktemp -d -t yolotui-gpu-check-XXXXXX)
trap 'rm -rf "$WORK"' EXIT

command -v nvidia-smi >/dev/null || { echo "gpu_check: nvidia-smi not found: no NVIDIA driver here" >&2; exit 1; }
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader
NGPU=$(nvidia-smi --query-gpu=index --format=csv,noheader | wc -l)

echo "== 1-3: AMP, channels_last, cudnn.benchmark (gelan-t, ${IMGSZ} px, batch ${BATCH}, ${STEPS} timed steps)"
echo "   3b: --compile (${COMPILE_CFGS-gelan-t yolov9-t}), AMP, in the same process"
IMGSZ=$IMGSZ BATCH=$BATCH STEPS=$STEPS COMPILE_CFGS="${COMPILE_CFGS-gelan-t yolov9-t}" "$PYTHON" - <<'PY'
import os, sys, time
import torch
from yolotui.config import load_hyp
from yolotui.configs import resolve_hyp
from yolotui.engine.loss.yolo_loss import loss_for_model
from yolotui.engine.model import build_model
from yolotui.engine.train.compiled import training_forward

assert torch.cuda.is_available(), "torch sees no CUDA device"
dev = torch.device("cuda:0")
imgsz, batch, steps = int(os.environ["IMGSZ"]), int(os.environ["BATCH"]), int(os.environ["STEPS"])
hyp = load_hyp(resolve_hyp(None))
g = torch.Generator().manual_seed(0)
imgs = torch.rand(batch, 3, imgsz, imgsz, generator=g)
targets = torch.cat([torch.tensor([[i, i % 5, 0.5, 0.5, 0.3, 0.4], [i, (i + 1) % 5, 0.25, 0.3, 0.2, 0.2]])
                     for i in range(batch)])

def rate(amp: bool, channels_last: bool, benchmark: bool, cfg: str = "gelan-t", compiled: bool = False):
    """(img/s, last loss, first loss, compile seconds) of `steps` timed training steps after 3 untimed ones
    (the compiled side compiles in the first, its trial step)."""
    torch.backends.cudnn.benchmark = benchmark
    torch.manual_seed(0)
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    model = build_model(cfg, nc=5).to(dev).to(memory_format=fmt).train()
    loss_fn = loss_for_model(model, hyp, 0.0)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.937, nesterov=True)
    scaler = torch.amp.GradScaler("cuda", enabled=amp)
    events = []
    forward = training_forward(model, compiled, emit=lambda type_, **f: events.append((type_, f)))
    x = imgs.to(dev).contiguous(memory_format=fmt)
    t = targets.to(dev)
    def step():
        with torch.autocast("cuda", enabled=amp):
            loss, _ = loss_fn(forward(x), t)
        scaler.scale(loss).backward(); scaler.step(opt); scaler.update(); opt.zero_grad(set_to_none=True)
        return loss
    first = float(step().detach())
    for _ in range(2):
        step()
    torch.cuda.synchronize(); start = time.perf_counter()
    for _ in range(steps):
        loss = step()
    torch.cuda.synchronize()
    value = float(loss)
    assert torch.isfinite(torch.tensor(value)), f"{cfg}: loss not finite (amp={amp}, channels_last={channels_last}, compiled={compiled})"
    if compiled:
        assert forward.state == "on", f"{cfg}: torch.compile fell back to eager: {events}"
    return steps * batch / (time.perf_counter() - start), value, first, forward.seconds

fp32 = rate(False, True, True)[0]
amp, amp_loss = rate(True, True, True)[:2]
print(f"AMP: fp32 {fp32:.1f} img/s, AMP {amp:.1f} img/s ({amp / fp32:.2f}x), last AMP loss {amp_loss:.3f}: OK")
contiguous = rate(True, False, True)[0]
print(f"channels_last: contiguous {contiguous:.1f} img/s, channels_last {amp:.1f} img/s ({amp / contiguous:.2f}x)")
torch.manual_seed(0)
model = build_model("gelan-t", nc=5).to(dev).eval()
with torch.no_grad():
    a = model(imgs[:2].to(dev))[0]
    b = model.to(memory_format=torch.channels_last)(imgs[:2].to(dev).contiguous(memory_format=torch.channels_last))[0]
err = (a - b).abs().max().item() / max(a.abs().max().item(), 1e-6)
assert err < 1e-3, f"channels_last changes eval outputs by {err:.2e} (relative)"
print(f"channels_last eval outputs agree (max relative difference {err:.1e}): OK")
off = rate(True, True, False)[0]
print(f"cudnn.benchmark: off {off:.1f} img/s, on {amp:.1f} img/s ({amp / off:.2f}x)")

for cfg in os.environ["COMPILE_CFGS"].split():  # 3b
    eager, _, eager_first, _ = rate(True, True, True, cfg)
    fast, _, fast_first, seconds = rate(True, True, True, cfg, compiled=True)
    rel = abs(fast_first - eager_first) / max(abs(eager_first), 1e-6)
    assert rel < 0.05, f"{cfg}: first compiled loss {fast_first:.4f} vs eager {eager_first:.4f}"
    print(f"--compile {cfg}: eager {eager:.1f} img/s, compiled {fast:.1f} img/s ({fast / eager:.2f}x), "
          f"compile {seconds:.1f} s, first loss {fast_first:.4f} vs eager {eager_first:.4f}: OK")
PY

echo "== 3c: training loader to the GPU (640 px, batch 16, ${LOADER_WORKERS:-8} workers)"
if "$PYTHON" -c "import ultralytics" 2>/dev/null; then
  "$PYTHON" bench/bench_loader.py --device cuda --workers "${LOADER_WORKERS:-8}" --images 320 --rounds 1 \
    || { echo "gpu_check: the loader bench failed" >&2; exit 1; }
else
  echo "3c skipped: ultralytics is not importable (see bench/bench_vs_ultralytics.py for a side venv)"
fi

if [ "$NGPU" -ge 2 ]; then
  echo "== 4: DDP on 2 GPUs (yolotui train --device 0,1, 1 epoch of demo data)"
  "$PYTHON" -m yolotui demo-data "$WORK/demo" --train 64 --val 16 --img 160 >/dev/null
  "$PYTHON" -m yolotui train --cfg gelan-t --data "$WORK/demo/data.yaml" --epochs 1 --batch 16 --imgsz 160 \
      --device 0,1 --workers 2 --project "$WORK/runs" --name ddp --attach
  grep -q '"type": *"done"' "$WORK/runs/ddp/events.jsonl" \
    || { echo "gpu_check: the DDP run did not write an end event; see $WORK/runs/ddp/train.log" >&2; exit 1; }
  echo "DDP on 2 GPUs: OK"
else
  echo "== 4: DDP skipped: $NGPU GPU(s) here, 2 needed"
fi

echo "== 5: NVML telemetry vs nvidia-smi"
"$PYTHON" - <<'PY'
import subprocess
from yolotui.telemetry.gpu import GpuSampler

snap = GpuSampler().sample()
assert snap.available, f"yolotui telemetry: NVML not available: {snap.reason}"
fields = "index,memory.used,memory.total,utilization.gpu,power.draw,temperature.gpu"
rows = subprocess.run(["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader,nounits"],
                      capture_output=True, text=True, check=True).stdout.strip().splitlines()
smi = {int(r.split(",")[0]): [v.strip() for v in r.split(",")[1:]] for r in rows}
bad = 0
for gpu in snap.gpus:
    used, total, util, power, temp = smi[gpu.index]
    print(f"GPU {gpu.index}: memory {gpu.memory_used_mb:.0f}/{gpu.memory_total_mb:.0f} MiB (smi {used}/{total}), "
          f"util {gpu.utilization_pct}% (smi {util}), power {gpu.power_w} W (smi {power}), "
          f"temp {gpu.temperature_c} C (smi {temp})")
    if abs(float(total) - gpu.memory_total_mb) > 2 or abs(float(used) - gpu.memory_used_mb) > 64:
        bad += 1
        print(f"  memory disagrees with nvidia-smi on GPU {gpu.index}")
    if temp.replace(".", "").isdigit() and gpu.temperature_c is not None and abs(float(temp) - gpu.temperature_c) > 3:
        bad += 1
        print(f"  temperature disagrees with nvidia-smi on GPU {gpu.index}")
raise SystemExit(1 if bad else 0)
PY
echo "NVML vs nvidia-smi: OK"
echo "gpu_check: all checks passed"
