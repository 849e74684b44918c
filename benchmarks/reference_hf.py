#!/usr/bin/env python3
"""Python reference of the gradient-accumulation experiment: transformers + peft, eager PyTorch.

The same experiment as the C++ trainer (examples/qwen3): a random-init Qwen3 (default the
qwen3-1.7b shape), LoRA r=16 alpha=32 dropout 0 on q/k/v/o/gate/up/down, AdamW lr 2e-4 with 5 linear
warm-up steps (lr of step s = lr * min(1, (s+1)/5)), no weight decay, every example exactly
--seq-len tokens from the same synthetic rule (splitmix64 per example, see synthetic_ids), the loss
divided by the accumulation count. Schedules MxA share one effective batch; each schedule starts
from a fresh model with the same seed.

Prints the median step time per schedule (first --skip steps excluded: cuBLAS handles, allocator
growth) and writes a JSON file. Exits 0 with a message when torch/transformers/peft are missing.

    python3 benchmarks/reference_hf.py --schedules 1x4,2x2,4x1 --steps 20 --json ref.json
"""
import argparse
import gc
import json
import statistics
import sys
import time

PRESETS = {
    "qwen3-1.7b": dict(vocab_size=151936, hidden_size=2048, intermediate_size=6144, num_hidden_layers=28,
                       num_attention_heads=16, num_key_value_heads=8, head_dim=128),
    "qwen3-0.6b": dict(vocab_size=151936, hidden_size=1024, intermediate_size=3072, num_hidden_layers=28,
                       num_attention_heads=16, num_key_value_heads=8, head_dim=128),
    "tiny": dict(vocab_size=256, hidden_size=64, intermediate_size=160, num_hidden_layers=2,
                 num_attention_heads=4, num_key_value_heads=2, head_dim=24),
}
TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
MASK = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15


def synthetic_ids(index, vocab, seq_len, seed):
    """Example `index`: the same ids as qwen3::synthetic_tokens (counter-based splitmix64)."""
    state = seed ^ ((GOLDEN * (index + 1)) & MASK)
    out = []
    for _ in range(seq_len):
        state = (state + GOLDEN) & MASK
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        z ^= z >> 31
        out.append(z % vocab)
    return out


def make_config(config_cls, shape):
    """A Qwen3Config; newer transformers keep the rotary base under rope_parameters."""
    common = dict(shape, rms_norm_eps=1e-6, tie_word_embeddings=True, max_position_embeddings=40960,
                  attention_bias=False, use_cache=False)
    try:
        cfg = config_cls(**common, rope_theta=1e6)
    except TypeError:
        cfg = config_cls(**common, rope_parameters={"rope_type": "default", "rope_theta": 1e6})
    cfg._attn_implementation = "sdpa"
    return cfg


def parse_schedules(text):
    out = []
    for item in text.split(","):
        m, _, a = item.strip().lower().partition("x")
        if not (m.isdigit() and a.isdigit()) or int(m) == 0 or int(a) == 0:
            raise SystemExit(f"bad schedule '{item}' (expected MxA, e.g. 2x2)")
        out.append((int(m), int(a)))
    if len({m * a for m, a in out}) != 1:
        raise SystemExit("schedules do not share one effective batch")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="qwen3-1.7b", choices=sorted(PRESETS))
    ap.add_argument("--schedules", default="1x4,2x2,4x1")
    ap.add_argument("--steps", type=int, default=20, help="optimizer steps per schedule (timed after --skip)")
    ap.add_argument("--skip", type=int, default=3, help="first steps excluded from the median")
    ap.add_argument("--seq-len", type=int, default=512)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"])
    ap.add_argument("--adapter-dtype", default="peft", choices=["peft", "model"],
                    help="peft: peft's default (adapters upcast to fp32 on a bf16 base); model: the model dtype")
    ap.add_argument("--checkpointing", action="store_true", help="gradient checkpointing (non-reentrant)")
    ap.add_argument("--compile", action="store_true", help="torch.compile the model")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--json", default="reference_hf.json")
    args = ap.parse_args()

    try:
        import torch
        import transformers
        import peft
        from transformers import Qwen3Config, Qwen3ForCausalLM
    except ImportError as e:
        print(f"reference_hf: skipped ({e}); needs torch, transformers (with Qwen3) and peft")
        return 0
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("reference_hf: skipped (no CUDA device)")
        return 0

    dtype = getattr(torch, args.dtype)
    device = torch.device(args.device)
    schedules = parse_schedules(args.schedules)
    shape = PRESETS[args.preset]
    cfg = make_config(Qwen3Config, shape)
    effective = schedules[0][0] * schedules[0][1]
    total_steps = args.steps
    examples = {i: synthetic_ids(i, shape["vocab_size"], args.seq_len, args.seed)
                for i in range(total_steps * effective)}

    results = {}
    for m, a in schedules:
        name = f"{m}x{a}"
        torch.manual_seed(args.seed)
        with torch.device(device):
            model = Qwen3ForCausalLM(cfg)
        model = model.to(dtype)
        if args.checkpointing:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        lcfg = peft.LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0, bias="none", target_modules=TARGETS,
                               task_type="CAUSAL_LM")
        model = peft.get_peft_model(model, lcfg, autocast_adapter_dtype=(args.adapter_dtype == "peft"))
        model.train()
        trainable = [p for p in model.parameters() if p.requires_grad]
        n_trainable = sum(p.numel() for p in trainable)
        adapter_dtype = str(trainable[0].dtype)
        opt = torch.optim.AdamW(trainable, lr=2e-4, weight_decay=0.0)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 5))
        fwd = torch.compile(model) if args.compile else model

        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        step_ms, losses = [], []
        for step in range(total_steps):
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            t0 = time.perf_counter()
            step_loss = 0.0
            for k in range(a):
                first = step * effective + k * m
                ids = torch.tensor([examples[first + i] for i in range(m)], dtype=torch.long).to(device, non_blocking=True)
                loss = fwd(input_ids=ids, labels=ids).loss / a
                loss.backward()
                step_loss += loss.detach()
            opt.step()
            sched.step()
            opt.zero_grad(set_to_none=True)
            losses.append(float(step_loss))  # CPU-GPU sync point: the step's GPU work is done
            step_ms.append((time.perf_counter() - t0) * 1e3)
        timed = step_ms[args.skip:] or step_ms
        peak = torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else None
        results[name] = dict(median_ms=statistics.median(timed), step_ms=step_ms, losses=losses,
                             peak_allocated_gib=peak, trainable_parameters=n_trainable, adapter_dtype=adapter_dtype)
        print(f"{name:>6}: median {statistics.median(timed):8.1f} ms/step  (trainable {n_trainable:,}, adapters "
              f"{adapter_dtype}, peak {peak if peak is None else round(peak, 1)} GiB, last loss {losses[-1]:.4f})",
              flush=True)
        del model, fwd, opt, sched, trainable
        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()

    doc = dict(tool="reference_hf", preset=args.preset, seq_len=args.seq_len, dtype=args.dtype,
               adapter_dtype=args.adapter_dtype, checkpointing=args.checkpointing, compile=args.compile,
               steps=args.steps, skip=args.skip, device=str(device),
               versions=dict(torch=torch.__version__, transformers=transformers.__version__, peft=peft.__version__),
               schedules=results)
    with open(args.json, "w") as f:
        json.dump(doc, f, indent=2)
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
