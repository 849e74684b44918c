#!/usr/bin/env python3
"""Logit parity of the C++ Qwen3 (examples/qwen3) with transformers' Qwen3 on the same weights.

Builds small random Qwen3 configs in transformers (fp32), perturbs every norm weight away from one
(so the norms are tested too), saves each as a Hugging Face snapshot (config.json + safetensors),
runs the C++ tool `qwen3_logits` on the snapshot and a fixed token sequence, and compares the logits
with transformers' on the same sequence.

Tolerance: fp32, max |C++ - transformers| <= 1e-4 * max(1, max |logits|). Both sides compute in fp32
with different kernels and summation orders; a real mismatch (a transposed weight, a wrong rotary
half, a missing norm) is orders of magnitude larger. The C++ side runs once with its fused operators
and once with --plain.

Runs where transformers (with Qwen3), safetensors and torch are importable; otherwise prints SKIP and
exits 0 (exit 77 with --strict).

    python3 tests/qwen3/hf_parity.py --tool build/examples/qwen3/qwen3_logits [--device cuda]
"""
import argparse
import os
import subprocess
import sys
import tempfile

CASES = {
    # tied head, head_dim != hidden / heads, 2 query heads per key/value head
    "tied-gqa": dict(vocab_size=512, hidden_size=96, intermediate_size=232, num_hidden_layers=3,
                     num_attention_heads=4, num_key_value_heads=2, head_dim=40, tie_word_embeddings=True),
    # separate output head, 4 query heads per key/value head
    "untied": dict(vocab_size=300, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                   num_attention_heads=8, num_key_value_heads=2, head_dim=16, tie_word_embeddings=False),
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


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tool", help="path of the qwen3_logits executable (default: build*/examples/qwen3/)")
    ap.add_argument("--device", default="cpu", help="device for the C++ side (cpu or cuda)")
    ap.add_argument("--strict", action="store_true", help="exit 77 instead of 0 when skipped")
    args = ap.parse_args()
    skip = 77 if args.strict else 0

    try:
        import torch
        from safetensors.torch import load_file
        from transformers import Qwen3Config, Qwen3ForCausalLM
    except ImportError as e:
        print(f"SKIP hf_parity: {e} (needs torch, safetensors and transformers with Qwen3)")
        return skip
    tool = find_tool(args.tool)
    if not tool:
        print("SKIP hf_parity: qwen3_logits not built (pass --tool)")
        return skip

    failures = 0
    for name, shape in CASES.items():
        common = dict(shape, rms_norm_eps=1e-6, max_position_embeddings=512, attention_bias=False,
                      use_cache=False, initializer_range=0.1)
        try:
            cfg = Qwen3Config(**common, rope_theta=1e6)
        except TypeError:
            cfg = Qwen3Config(**common, rope_parameters={"rope_type": "default", "rope_theta": 1e6})
        cfg._attn_implementation = "eager"
        torch.manual_seed(0)
        model = Qwen3ForCausalLM(cfg).float().eval()
        with torch.no_grad():
            for pname, p in model.named_parameters():
                if "norm" in pname:
                    p.uniform_(0.5, 1.5)
        ids = torch.tensor([IDS], dtype=torch.long) % shape["vocab_size"]
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
    print(f"{len(CASES) * 2 - failures} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
