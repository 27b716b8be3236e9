"""Write a tiny random-weight Llama model (GGUF) and its tokenizer.json, locally, in ~1 s.

Nothing is downloaded: a byte-level BPE tokenizer is trained on text that ships with CPython
(`pydoc_data.topics`), weights are N(0, 0.02) from a fixed seed. Output quality is irrelevant
for a load benchmark (send ignore_eos with max_tokens). See docs/REAL_ENGINES.md.

    python tests/realengine/tiny_model.py OUT_DIR [--dim 256 --layers 4]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHATML = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def train_tokenizer(vocab: int):
    from pydoc_data.topics import topics
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab, special_tokens=SPECIAL, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(list(topics.values()), trainer)
    return tok


def write_model(out: Path, dim: int = 256, layers: int = 4, heads: int = 8, kv_heads: int = 4, ffn: int = 768,
                vocab: int = 8192, context: int = 32768, seed: int = 0) -> Path:
    import gguf

    out.mkdir(parents=True, exist_ok=True)
    tok = train_tokenizer(vocab)
    tok.save(str(out / "tokenizer.json"))
    spec = json.loads(tok.to_str())
    ids = spec["model"]["vocab"]
    tokens = [t for t, _ in sorted(ids.items(), key=lambda kv: kv[1])]
    merges = [m if isinstance(m, str) else " ".join(m) for m in spec["model"]["merges"]]
    n_vocab = len(tokens)
    head_dim = dim // heads
    path = out / "tiny-llama.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("tiny-llama")
    w.add_context_length(context)
    w.add_embedding_length(dim)
    w.add_block_count(layers)
    w.add_feed_forward_length(ffn)
    w.add_head_count(heads)
    w.add_head_count_kv(kv_heads)
    w.add_rope_dimension_count(head_dim)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_file_type(1)  # mostly F16
    w.add_vocab_size(n_vocab)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("gpt-2")
    w.add_token_list(tokens)
    w.add_token_types([3 if t in SPECIAL else 1 for t in tokens])
    w.add_token_merges(merges)
    w.add_bos_token_id(ids["<|endoftext|>"])
    w.add_eos_token_id(ids["<|im_end|>"])
    w.add_add_bos_token(False)
    w.add_chat_template(CHATML)
    rng = np.random.default_rng(seed)

    def weight(*shape):
        return (rng.standard_normal(shape) * 0.02).astype(np.float16)

    w.add_tensor("token_embd.weight", weight(n_vocab, dim))
    for i in range(layers):
        w.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(dim, dtype=np.float32))
        w.add_tensor(f"blk.{i}.attn_q.weight", weight(dim, dim))
        w.add_tensor(f"blk.{i}.attn_k.weight", weight(kv_heads * head_dim, dim))
        w.add_tensor(f"blk.{i}.attn_v.weight", weight(kv_heads * head_dim, dim))
        w.add_tensor(f"blk.{i}.attn_output.weight", weight(dim, dim))
        w.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(dim, dtype=np.float32))
        w.add_tensor(f"blk.{i}.ffn_gate.weight", weight(ffn, dim))
        w.add_tensor(f"blk.{i}.ffn_up.weight", weight(ffn, dim))
        w.add_tensor(f"blk.{i}.ffn_down.weight", weight(dim, ffn))
    w.add_tensor("output_norm.weight", np.ones(dim, dtype=np.float32))
    w.add_tensor("output.weight", weight(n_vocab, dim))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def write_hf(out: Path, dim: int = 256, layers: int = 4, heads: int = 8, kv_heads: int = 4, ffn: int = 768,
             vocab: int = 8192, context: int = 32768, seed: int = 0) -> Path:
    """The same architecture as a Hugging Face folder (config.json, model.safetensors,
    tokenizer.json, tokenizer_config.json) for vLLM. Random weights of its own: a load
    benchmark needs the shapes, not the GGUF's exact numbers."""
    out.mkdir(parents=True, exist_ok=True)
    tok = train_tokenizer(vocab)
    tok.save(str(out / "tokenizer.json"))
    ids = json.loads(tok.to_str())["model"]["vocab"]
    n_vocab = len(ids)
    head_dim = dim // heads
    rng = np.random.default_rng(seed)

    def weight(*shape):
        return (rng.standard_normal(shape) * 0.02).astype(np.float32)

    tensors = {"model.embed_tokens.weight": weight(n_vocab, dim), "model.norm.weight": np.ones(dim, np.float32),
               "lm_head.weight": weight(n_vocab, dim)}
    for i in range(layers):
        p = f"model.layers.{i}."
        tensors.update({
            p + "input_layernorm.weight": np.ones(dim, np.float32),
            p + "post_attention_layernorm.weight": np.ones(dim, np.float32),
            p + "self_attn.q_proj.weight": weight(dim, dim),
            p + "self_attn.k_proj.weight": weight(kv_heads * head_dim, dim),
            p + "self_attn.v_proj.weight": weight(kv_heads * head_dim, dim),
            p + "self_attn.o_proj.weight": weight(dim, dim),
            p + "mlp.gate_proj.weight": weight(ffn, dim),
            p + "mlp.up_proj.weight": weight(ffn, dim),
            p + "mlp.down_proj.weight": weight(dim, ffn),
        })
    _write_safetensors(out / "model.safetensors", tensors)
    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": dim, "intermediate_size": ffn,
        "num_attention_heads": heads, "num_key_value_heads": kv_heads, "num_hidden_layers": layers,
        "vocab_size": n_vocab, "max_position_embeddings": context, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
        "hidden_act": "silu", "tie_word_embeddings": False, "torch_dtype": "float32",
        "bos_token_id": ids["<|endoftext|>"], "eos_token_id": ids["<|im_end|>"],
    }
    (out / "config.json").write_text(json.dumps(config, indent=1))
    (out / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<|endoftext|>", "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>", "add_bos_token": False, "chat_template": CHATML, "model_max_length": context,
    }, indent=1))
    return out


def _write_safetensors(path: Path, tensors: dict[str, np.ndarray]) -> None:
    header, offset = {}, 0
    for name, a in tensors.items():
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [offset, offset + a.nbytes]}
        offset += a.nbytes
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little") + text)
        for a in tensors.values():
            f.write(np.ascontiguousarray(a).tobytes())


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path)
    ap.add_argument("--dim", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--hf", action="store_true", help="write the Hugging Face folder (for vLLM) instead")
    args = ap.parse_args()
    write = write_hf if args.hf else write_model
    print(write(args.out, dim=args.dim, layers=args.layers))
