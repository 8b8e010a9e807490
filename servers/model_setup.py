"""Loading the model and tokenizer for the reference servers (torch and transformers).

Weights come from a local directory or the Hugging Face cache, never from the network;
with --random-weights the model is built from an architecture config with a fixed seed.
The tokenizer comes from --tokenizer-file or the model's own files; the chat template
from the tokenizer, else from the template shipped beside this file.
"""

from __future__ import annotations

import argparse
import hashlib
import inspect
import os
import platform
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, PreTrainedTokenizerFast

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_ARCHITECTURE_DIR = os.path.join(HERE, "qwen2.5-1.5b-instruct")
DEFAULT_CHAT_TEMPLATE = os.path.join(DEFAULT_ARCHITECTURE_DIR, "chat_template.jinja")

# Tokens that end an assistant turn in the Qwen2 family's vocabulary.
END_OF_TURN_TOKENS = ("<|im_end|>", "<|endoftext|>")

DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}


class SetupError(Exception):
    """The model or tokenizer cannot be loaded as asked; the message says what to change."""


@dataclass
class Loaded:
    model: Any
    tokenizer: Any
    device: torch.device
    eos_token_ids: frozenset[int]
    max_model_len: int
    info: dict[str, Any] = field(default_factory=dict)


def _sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def load_tokenizer(args: argparse.Namespace, info: dict[str, Any]) -> Any:
    if args.tokenizer_file:
        if not os.path.isfile(args.tokenizer_file):
            raise SetupError(f"--tokenizer-file {args.tokenizer_file}: no such file")
        tokenizer = PreTrainedTokenizerFast(tokenizer_file=args.tokenizer_file,
                                            eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                            clean_up_tokenization_spaces=False)
        info["tokenizer"] = os.path.abspath(args.tokenizer_file)
        info["tokenizer_sha256"] = _sha256(args.tokenizer_file)
    else:
        try:
            tokenizer = AutoTokenizer.from_pretrained(args.model, local_files_only=True)
        except Exception as exc:
            raise SetupError(f"no tokenizer for --model {args.model!r} in a local directory or the Hugging Face "
                             f"cache ({type(exc).__name__}); pass --tokenizer-file PATH/tokenizer.json") from exc
        info["tokenizer"] = args.model
    template_file = args.chat_template or DEFAULT_CHAT_TEMPLATE
    if args.chat_template or not getattr(tokenizer, "chat_template", None):
        if not os.path.isfile(template_file):
            raise SetupError(f"--chat-template {template_file}: no such file")
        with open(template_file, encoding="utf-8") as f:
            tokenizer.chat_template = f.read()
        info["chat_template"] = os.path.abspath(template_file)
    else:
        info["chat_template"] = "from the tokenizer"
    return tokenizer


def _eos_ids(tokenizer: Any, model: Any) -> frozenset[int]:
    ids: set[int] = set()
    for token in END_OF_TURN_TOKENS:
        token_id = tokenizer.convert_tokens_to_ids(token)
        if isinstance(token_id, int) and token_id >= 0 and token_id != getattr(tokenizer, "unk_token_id", None):
            ids.add(token_id)
    generation_eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    if isinstance(generation_eos, int):
        ids.add(generation_eos)
    elif isinstance(generation_eos, (list, tuple)):
        ids.update(int(i) for i in generation_eos)
    return frozenset(i for i in ids if i >= 0)


def _from_config(config: Any, dtype: torch.dtype, attn_implementation: str) -> Any:
    kwargs: dict[str, Any] = {"attn_implementation": attn_implementation}
    params = inspect.signature(AutoModelForCausalLM.from_config).parameters
    accepts_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    if "dtype" in params or accepts_any:
        kwargs["dtype"] = dtype
    try:
        return AutoModelForCausalLM.from_config(config, **kwargs)
    except TypeError:
        kwargs.pop("dtype", None)
        return AutoModelForCausalLM.from_config(config, torch_dtype=dtype, **kwargs)


def load(args: argparse.Namespace, attn_implementation: str = "sdpa") -> Loaded:
    """The model on its device in eval mode, with tokenizer, stop ids and provenance."""
    dtype = DTYPES[args.dtype]
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SetupError("--device cuda but torch sees no CUDA device")
    info: dict[str, Any] = {
        "model": args.model, "dtype": args.dtype, "random_weights": bool(args.random_weights),
        "seed": args.seed, "python": platform.python_version(),
        "torch": torch.__version__, "transformers": transformers.__version__,
        "device": str(device),
    }
    if device.type == "cuda":
        info["gpu"] = torch.cuda.get_device_name(device)
    tokenizer = load_tokenizer(args, info)

    torch.manual_seed(args.seed)
    if args.random_weights:
        config_path = args.architecture_config or os.path.join(DEFAULT_ARCHITECTURE_DIR, "config.json")
        if not os.path.isfile(config_path):
            raise SetupError(f"--architecture-config {config_path}: no such file")
        config = AutoConfig.from_pretrained(os.path.dirname(os.path.abspath(config_path)))
        info["architecture_config"] = os.path.abspath(config_path)
        info["architecture_config_sha256"] = _sha256(config_path)
        with torch.device(device):
            model = _from_config(config, dtype, attn_implementation)
        info["weights"] = (f"random (seed {args.seed}) from the architecture config; "
                           "generated text is meaningless")
    else:
        try:
            model = AutoModelForCausalLM.from_pretrained(args.model, dtype=dtype, local_files_only=True,
                                                         attn_implementation=attn_implementation)
        except (OSError, ValueError) as exc:
            raise SetupError(f"--model {args.model!r}: no weights in a local directory or the Hugging Face "
                             f"cache ({exc}); pass --random-weights to build it from its architecture config") from exc
        info["weights"] = "pretrained, from " + str(getattr(model, "name_or_path", args.model))
    model = model.to(device=device, dtype=dtype).eval()
    info["parameters"] = sum(p.numel() for p in model.parameters())

    max_positions = int(getattr(model.config, "max_position_embeddings", 0) or 0)
    max_model_len = args.max_model_len or max_positions
    if max_model_len < 2:
        raise SetupError("--max-model-len must be at least 2 (the config has no max_position_embeddings)")
    if max_positions and max_model_len > max_positions:
        raise SetupError(f"--max-model-len {max_model_len} exceeds the config's max_position_embeddings "
                         f"{max_positions}")
    info["max_model_len"] = max_model_len
    eos = _eos_ids(tokenizer, model)
    info["eos_token_ids"] = sorted(eos)
    return Loaded(model=model, tokenizer=tokenizer, device=device, eos_token_ids=eos,
                  max_model_len=max_model_len, info=info)


def encode_chat(tokenizer: Any, messages: list[dict[str, str]]) -> list[int]:
    """Render the chat template with the generation prompt and tokenize it (no extra specials)."""
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def make_decoder(tokenizer: Any) -> Callable[[list[int]], str]:
    """Text of token ids with special tokens skipped; ids outside the vocabulary decode to nothing."""
    size = len(tokenizer)

    def decode(token_ids: list[int]) -> str:
        return tokenizer.decode([i for i in token_ids if 0 <= i < size], skip_special_tokens=True,
                                clean_up_tokenization_spaces=False)

    return decode
