#!/usr/bin/env python3
"""Logit parity of the C++ models (examples/qwen3: Qwen3, Llama) with transformers' on the same weights.

Builds small random Qwen3 and Llama configs in transformers (fp32), perturbs every norm weight away
from one (so the norms are tested too), saves each as a Hugging Face snapshot (config.json +
safetensors), runs the C++ tool `qwen3_logits` on the snapshot and a fixed token sequence, and
compares the logits with transformers' on the same sequence.

The Llama cases use the llama3 rotary scaling with a short original context (32 positions, the
sequence has 40), so that most rotary frequencies are interpolated or stretched: with Llama-3.2-1B's
own parameters (context 8192) a wrong scaling would move these logits by less than the tolerance.
One case keeps those parameters anyway, to read them as released configs write them.

Tolerance: fp32, max |C++ - transformers| <= 1e-4 * max(1, max |logits|). Both sides compute in fp32
with different kernels and summation orders; a real mismatch (a transposed weight, a wrong rotary
half, a missing norm) is orders of magnitude larger. The C++ side runs once with its fused operators
and once with --plain.

Runs where transformers (with Qwen3 and Llama), safetensors and torch are importable; otherwise
prints SKIP and exits 0 (exit 77 with --strict).

    python3 tests/qwen3/hf_parity.py --tool build/examples/qwen3/qwen3_logits [--device cuda] [--family llama]
"""
import argparse
import os
import subprocess
import sys
import tempfile

QWEN3_ROPE = dict(rope_type="default", rope_theta=1e6)
CASES = {
    # Qwen3: tied head, head_dim != hidden / heads, 2 query heads per key/value head
    "tied-gqa": dict(family="qwen3", rope=QWEN3_ROPE, rms_norm_eps=1e-6,
                     vocab_size=512, hidden_size=96, intermediate_size=232, num_hidden_layers=3,
                     num_attention_heads=4, num_key_value_heads=2, head_dim=40, tie_word_embeddings=True),
    # Qwen3: separate output head, 4 query heads per key/value head
    "untied": dict(family="qwen3", rope=QWEN3_ROPE, rms_norm_eps=1e-6,
                   vocab_size=300, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                   num_attention_heads=8, num_key_value_heads=2, head_dim=16, tie_word_embeddings=False),
    # Llama: tied head, GQA, head_dim = hidden / heads = 24; llama3 scaling with wavelength bounds 8 and
    # 32: of the 12 frequencies, 1 is kept, 2 are interpolated, 9 are divided by 8
    "llama-tied-gqa-llama3": dict(
        family="llama", rms_norm_eps=1e-5,
        rope=dict(rope_type="llama3", rope_theta=10000.0, factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                  original_max_position_embeddings=32),
        vocab_size=512, hidden_size=96, intermediate_size=256, num_hidden_layers=3,
        num_attention_heads=4, num_key_value_heads=2, head_dim=24, tie_word_embeddings=True),
    # Llama: separate output head, multi-head attention, head_dim 16 != hidden / heads, plain rotary
    "llama-untied-mha": dict(
        family="llama", rms_norm_eps=1e-5, rope=dict(rope_type="default", rope_theta=500000.0),
        vocab_size=300, hidden_size=64, intermediate_size=160, num_hidden_layers=2,
        num_attention_heads=8, num_key_value_heads=8, head_dim=16, tie_word_embeddings=False),
    # Llama-3.2-1B's rotary parameters and norm epsilon at a small size
    "llama-3.2-rope": dict(
        family="llama", rms_norm_eps=1e-5,
        rope=dict(rope_type="llama3", rope_theta=500000.0, factor=32.0, low_freq_factor=1.0, high_freq_factor=4.0,
                  original_max_position_embeddings=8192),
        vocab_size=400, hidden_size=128, intermediate_size=320, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=1, head_dim=32, tie_word_embeddings=True),
}
IDS = [(t * 7919 + 13) % 300 for t in range(40)]


def find_tool(explicit):
    if explicit:
        return explicit
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(here))
    for build in sorted(os.listdir(root)):
        cand = os.path.join(root, build, "examples", "qwen3", "qwen3_logits")
        if build.startswith("build") and os.access(cand, os.X_OK):
            return cand
    return None


def make_config(transformers, family, case):
    """The transformers config of a case. transformers 5 takes the rotary parameters as
    rope_parameters (rope_theta inside); 4.x as rope_theta plus rope_scaling."""
    shape = {k: v for k, v in case.items() if k not in ("family", "rope")}
    rope = dict(case["rope"])
    common = dict(shape, max_position_embeddings=512, attention_bias=False, use_cache=False, initializer_range=0.1)
    if family == "llama":
        common["mlp_bias"] = False
    cls = transformers.Qwen3Config if family == "qwen3" else transformers.LlamaConfig
    if int(transformers.__version__.split(".")[0]) >= 5:
        return cls(**common, rope_parameters=rope)
    theta = rope.pop("rope_theta")
    return cls(**common, rope_theta=theta, rope_scaling=None if rope["rope_type"] == "default" else rope)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tool", help="path of the qwen3_logits executable (default: build*/examples/qwen3/)")
    ap.add_argument("--device", default="cpu", help="device for the C++ side (cpu or cuda)")
    ap.add_argument("--family", choices=["qwen3", "llama", "all"], default="all", help="which cases to run")
    ap.add_argument("--strict", action="store_true", help="exit 77 instead of 0 when skipped")
    args = ap.parse_args()
    skip = 77 if args.strict else 0

    try:
        import torch
        import transformers
        from safetensors.torch import load_file
        from transformers import LlamaForCausalLM, Qwen3ForCausalLM
    except ImportError as e:
        print(f"SKIP hf_parity: {e} (needs torch, safetensors and transformers with Qwen3 and Llama)")
        return skip
    tool = find_tool(args.tool)
    if not tool:
        print("SKIP hf_parity: qwen3_logits not built (pass --tool)")
        return skip

    cases = {n: c for n, c in CASES.items() if args.family in ("all", c["family"])}
    failures = 0
    for name, case in cases.items():
        family = case["family"]
        cfg = make_config(transformers, family, case)
        cfg._attn_implementation = "eager"
        torch.manual_seed(0)
        model = (Qwen3ForCausalLM if family == "qwen3" else LlamaForCausalLM)(cfg).float().eval()
        # The reference must really use the rotary type under test (a config keyword it ignored would
        # leave plain rotary on both sides, and the case would pass without testing the scaling).
        rope_type = getattr(model.model.rotary_emb, "rope_type", None)
        if rope_type != case["rope"]["rope_type"]:
            print(f"FAIL {name}: transformers built rotary type {rope_type!r}, not {case['rope']['rope_type']!r}")
            failures += 2
            continue
        with torch.no_grad():
            for pname, p in model.named_parameters():
                if "norm" in pname:
                    p.uniform_(0.5, 1.5)
        ids = torch.tensor([IDS], dtype=torch.long) % case["vocab_size"]
        with torch.no_grad():
            ref = model(input_ids=ids).logits.float()
        with tempfile.TemporaryDirectory() as d:
            model.save_pretrained(d)  # safetensors is the default format
            for plain in (False, True):
                out = os.path.join(d, "logits.safetensors")
                cmd = [tool, d, out, "--ids", ",".join(str(int(i)) for i in ids[0]), "--device", args.device]
                if plain:
                    cmd.append("--plain")
                run = subprocess.run(cmd, capture_output=True, text=True)
                label = f"{name}{' (plain ops)' if plain else ''}"
                if run.returncode != 0:
                    print(f"FAIL {label}: qwen3_logits exited {run.returncode}: {run.stderr.strip()}")
                    failures += 1
                    continue
                got = load_file(out)["logits"].float()
                diff = (got - ref).abs().max().item()
                scale = max(1.0, ref.abs().max().item())
                ok = got.shape == ref.shape and diff <= 1e-4 * scale
                failures += 0 if ok else 1
                print(f"{'ok  ' if ok else 'FAIL'} {label}: logits {tuple(got.shape)}, max |diff| {diff:.3e} "
                      f"(tolerance {1e-4 * scale:.1e}, max |logit| {ref.abs().max().item():.2f})")
    print(f"{len(cases) * 2 - failures} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
