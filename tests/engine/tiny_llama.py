"""Write a tiny Llama-architecture model folder that vLLM can serve with ``--load-format dummy``.

Run with the vLLM environment's Python (it has ``tokenizers``; tokenwatch does not depend on it)::

    python tests/engine/tiny_llama.py OUT_DIR CORPUS_FILE...

The folder holds a Llama config (hidden size 128, 2 layers, 2 heads, float32) and a byte-level BPE
tokenizer of 512 tokens trained on the given text files. No weights: vLLM's dummy loader fills them with
random numbers, so nothing is downloaded and the model's output is noise of the requested length (the
tests ask for a fixed number of tokens and tell vLLM to ignore the end-of-sequence token).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

VOCAB_SIZE = 512
SPECIAL_TOKENS = ["<s>", "</s>", "<unk>"]  # ids 0, 1, 2: the trainer puts special tokens first
MAX_POSITIONS = 1024


def llama_config() -> dict[str, object]:
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": 128,
        "intermediate_size": 256,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "num_key_value_heads": 2,
        "head_dim": 64,
        "hidden_act": "silu",
        "max_position_embeddings": MAX_POSITIONS,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "vocab_size": VOCAB_SIZE,
        "bos_token_id": 0,
        "eos_token_id": 1,
        "tie_word_embeddings": False,
        "torch_dtype": "float32",
    }


def train_tokenizer(corpus: list[Path], out: Path) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train([str(p) for p in corpus], trainer)
    if tokenizer.get_vocab_size() != VOCAB_SIZE:
        raise SystemExit(f"the corpus gave {tokenizer.get_vocab_size()} tokens, not {VOCAB_SIZE}")
    tokenizer.save(str(out / "tokenizer.json"))


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        raise SystemExit(__doc__)
    out, corpus = Path(argv[0]), [Path(p) for p in argv[1:]]
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(llama_config(), indent=2))
    (out / "generation_config.json").write_text(json.dumps({"bos_token_id": 0, "eos_token_id": 1}))
    train_tokenizer(corpus, out)
    tokenizer_config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": "<s>",
        "eos_token": "</s>",
        "unk_token": "<unk>",
        "model_max_length": MAX_POSITIONS,
        "add_bos_token": False,
    }
    (out / "tokenizer_config.json").write_text(json.dumps(tokenizer_config, indent=2))
    (out / "special_tokens_map.json").write_text(
        json.dumps({"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"})
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
