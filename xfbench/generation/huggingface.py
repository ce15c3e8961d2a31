"""Hugging Face transformers' GPT2LMHeadModel with the canonical weights: the reference
the generation tests hold every framework's tokens and logits to, and the `generate`
whose speed docs/generation.md stands beside the suite's.

The model is built in memory from a GPT2Config of the spec's sizes (no download, no
tokenizer). The weight mapping: GPT-2's Conv1D layers keep their weight as (in, out),
the transpose of the canonical (out, in); the query/key/value rows are in the same order
(q, k, v, each head's dh together); the head is tied to the word embedding, as ours.

    python -m xfbench.generation.huggingface [--batch-size 1] [--lengths 128/128]
        [--threads N] [--scale full]
measures HF's generate (greedy, SDPA, its default dynamic cache) with the suite's TTFT
(a generate of one new token) and TPOT ((end-to-end - TTFT) / (OSL - 1)) on fp32 weights.
"""

from __future__ import annotations

import statistics
import sys
import time

import numpy as np

from xfbench.models import Spec
from xfbench.models import layers as L


def config(spec: Spec):
    from transformers import GPT2Config

    embed = spec.layer(L.TokenEmbedding)[0]
    blocks = spec.layer(L.TransformerBlock)
    return GPT2Config(
        vocab_size=embed.vocab,
        n_positions=embed.positions,
        n_embd=embed.dim,
        n_layer=len(blocks),
        n_head=blocks[0].heads,
        n_inner=blocks[0].ff,
        activation_function="gelu_new",  # GELU's tanh approximation, GPT-2's
        layer_norm_epsilon=blocks[0].eps,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=None,
    )


def state_dict(spec: Spec, weights: dict[str, np.ndarray]) -> dict:
    """GPT2LMHeadModel's state dict entries from canonical weights (torch tensors)."""
    import torch

    t = lambda a: torch.from_numpy(np.ascontiguousarray(a))  # noqa: E731
    out = {
        "transformer.wte.weight": t(weights["embed.word"]),
        "transformer.wpe.weight": t(weights["embed.position"]),
        "transformer.ln_f.weight": t(weights["final_ln.weight"]),
        "transformer.ln_f.bias": t(weights["final_ln.bias"]),
    }
    conv1d = {"attn.qkv": "attn.c_attn", "attn.out": "attn.c_proj", "mlp.fc": "mlp.c_fc",
              "mlp.proj": "mlp.c_proj"}  # fmt: skip
    for i, block in enumerate(spec.layer(L.TransformerBlock)):
        ours, theirs = block.name, f"transformer.h.{i}"
        for a, b in conv1d.items():
            out[f"{theirs}.{b}.weight"] = t(weights[f"{ours}.{a}.weight"].T)
            out[f"{theirs}.{b}.bias"] = t(weights[f"{ours}.{a}.bias"])
        for a, b in (("ln1", "ln_1"), ("ln2", "ln_2")):
            out[f"{theirs}.{b}.weight"] = t(weights[f"{ours}.{a}.weight"])
            out[f"{theirs}.{b}.bias"] = t(weights[f"{ours}.{a}.bias"])
    return out


def model(spec: Spec, weights: dict[str, np.ndarray]):
    """GPT2LMHeadModel in fp32, eval mode, SDPA attention, with the canonical weights."""
    from transformers import GPT2LMHeadModel

    settings = config(spec)
    settings._attn_implementation = "sdpa"
    net = GPT2LMHeadModel(settings)
    missing, unexpected = net.load_state_dict(state_dict(spec, weights), strict=False)
    missing = [k for k in missing if k != "lm_head.weight" and not k.endswith(".attn.bias")]
    if missing or unexpected:
        raise ValueError(f"weight mapping: missing {missing}, unexpected {unexpected}")
    net.tie_weights()
    return net.eval()


def greedy(net, prompt: np.ndarray, new_tokens: int) -> np.ndarray:
    """HF generate's greedy tokens after prompt (B, ISL): (B, OSL), no stop token."""
    import torch

    with torch.inference_mode():
        out = net.generate(
            torch.from_numpy(prompt),
            attention_mask=torch.ones(prompt.shape, dtype=torch.int64),
            do_sample=False,
            max_new_tokens=new_tokens,
            min_new_tokens=new_tokens,
            pad_token_id=0,
        )
    return out[:, prompt.shape[1] :].numpy()


def logits(net, sequence: np.ndarray) -> np.ndarray:
    """Teacher-forced logits (B, T, vocab) over sequence (B, T), no cache."""
    import torch

    with torch.inference_mode():
        return net(torch.from_numpy(sequence)).logits.float().numpy()


def timed(net, prompt: np.ndarray, new_tokens: int, rounds: int = 3) -> dict:
    """HF generate's TTFT, TPOT and tokens/s, medians of rounds after one warm-up."""
    greedy(net, prompt, new_tokens)
    first, whole = [], []
    for _ in range(rounds):
        t0 = time.perf_counter()
        greedy(net, prompt, 1)
        first.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        greedy(net, prompt, new_tokens)
        whole.append(time.perf_counter() - t0)
    ttft, e2e = statistics.median(first), statistics.median(whole)
    tpot = (e2e - ttft) / (new_tokens - 1)
    b = prompt.shape[0]
    return {"ttft_s": ttft, "tpot_s": tpot, "e2e_s": e2e, "output_tokens_per_s": b * new_tokens / e2e,
            "per_sequence_tokens_per_s": 1 / tpot}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    from xfbench.command_line import ArgumentParser, parse_command_line
    from xfbench.errors import UsageError
    from xfbench.generation.cell import batches, lengths
    from xfbench.generation.measure import WEIGHTS, prompt_ids
    from xfbench.harness import threads
    from xfbench.harness.equivalence import trained_range
    from xfbench.models import get_spec, initial_weights

    parser = ArgumentParser(prog="python -m xfbench.generation.huggingface")
    parser.add_argument("--batch-size", default=None)
    parser.add_argument("--lengths", default=None)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--scale", default="full", choices=("full", "smoke"))
    args = parse_command_line(parser, argv)
    if isinstance(args, int):
        return args
    try:
        pairs, sizes = lengths(args.lengths, args.scale), batches(args.batch_size, args.scale)
        n = threads.pin(args.threads) if args.threads else None
    except UsageError as e:
        print(f"{parser.prog}: {e}", file=sys.stderr)
        return 2
    import torch

    torch.set_num_threads(args.threads or torch.get_num_threads())
    spec = get_spec("gpt2", args.scale)
    net = model(spec, trained_range(spec, initial_weights(spec)))
    print(f"Hugging Face GPT2LMHeadModel.generate, fp32, {torch.get_num_threads()} threads"
          f"{'' if n is None else ' (pinned)'}, weights {WEIGHTS}")  # fmt: skip
    for isl, osl in pairs:
        for b in sizes:
            r = timed(net, prompt_ids(spec, b, isl), osl)
            print(f"batch {b} {isl}/{osl}: TTFT {r['ttft_s'] * 1e3:.1f} ms, TPOT "
                  f"{r['tpot_s'] * 1e3:.2f} ms, {r['output_tokens_per_s']:.1f} tokens/s, "
                  f"{r['per_sequence_tokens_per_s']:.1f} per sequence")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
