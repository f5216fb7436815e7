"""Fashion-MNIST data, prompts and the word-level tokenizer of the embedded model.

Tokenizer ids (fixed; written to text_tokenizer/tokenizer.json):
    0 <unk>            unknown word
    1 <|im_end|>       end of sequence (eos_token, appended after every prompt, as the pipeline does)
    2 <|vision_start|> start of the vision segment (appended after eos)
    3..                lower-case words, in the order of WORDS below
The understanding prefix of a prompt is  word ids + [1, 2];  the empty (unconditional) prompt is [1, 2].
"""
import gzip
import json
import os

import numpy as np
import torch

DATA_DIR = "/usr/share/datasets/fashion-mnist"

CLASSES = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
           "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"]

# Noun phrases per class (with their article); every phrase is also used bare, without the article.
NOUN_PHRASES = [
    ["a t-shirt", "a top", "a tee", "a tshirt"],
    ["trousers", "a pair of trousers", "pants", "a pair of pants"],
    ["a pullover", "a sweater", "a jumper"],
    ["a dress", "a summer dress"],
    ["a coat", "a jacket", "a winter coat"],
    ["a sandal", "sandals", "a pair of sandals"],
    ["a shirt", "a button shirt", "a blouse"],
    ["a sneaker", "sneakers", "a trainer", "a pair of sneakers"],
    ["a bag", "a handbag", "a purse"],
    ["an ankle boot", "a boot", "boots", "a pair of ankle boots"],
]
TEMPLATES = ["{}", "a photo of {}", "a picture of {}", "an image of {}", "a drawing of {}"]

UNK, EOS, VISION_START = "<unk>", "<|im_end|>", "<|vision_start|>"
SPECIAL = [UNK, EOS, VISION_START]


def _strip_article(np_):
    for art in ("a pair of ", "a ", "an "):
        if np_.startswith(art):
            return np_[len(art):]
    return np_


def class_prompts():
    """All training prompts per class (deduplicated, deterministic order)."""
    out = []
    for phrases in NOUN_PHRASES:
        ps = []
        for p in phrases:
            for t in TEMPLATES:
                ps.append(t.format(p))
            ps.append(_strip_article(p))
        out.append(sorted(set(ps)))
    return out


PROMPTS = class_prompts()
# The canonical prompt per class, used for evaluation grids and by stepmix documentation.
CANONICAL = ["a photo of a t-shirt", "a photo of trousers", "a photo of a pullover", "a photo of a dress",
             "a photo of a coat", "a photo of a sandal", "a photo of a shirt", "a photo of a sneaker",
             "a photo of a bag", "a photo of an ankle boot"]


def _vocab_words():
    words = []
    for ps in PROMPTS:
        for p in ps:
            for w in p.split():
                if w not in words:
                    words.append(w)
    return words


WORDS = _vocab_words()
VOCAB = {tok: i for i, tok in enumerate(SPECIAL + WORDS)}
EOS_ID, VISION_START_ID, UNK_ID = VOCAB[EOS], VOCAB[VISION_START], VOCAB[UNK]


def encode(prompt):
    """Prompt -> understanding prefix ids (words + eos + vision-start); lowercase, whitespace split."""
    ids = [VOCAB.get(w, UNK_ID) for w in prompt.lower().split()]
    return ids + [EOS_ID, VISION_START_ID]


def tokenizer_json():
    """Standard Hugging Face `tokenizers` JSON: WordLevel model, Lowercase normalizer, WhitespaceSplit."""
    added = [{"id": VOCAB[t], "content": t, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for t in SPECIAL]
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": {"type": "Lowercase"},
        "pre_tokenizer": {"type": "WhitespaceSplit"},
        "post_processor": None,
        "decoder": None,
        "model": {"type": "WordLevel", "vocab": VOCAB, "unk_token": UNK},
    }


def tokenizer_config_json():
    return {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "unk_token": UNK,
        "eos_token": EOS,
        "vision_start_token": VISION_START,
        "model_max_length": 64,
        "clean_up_tokenization_spaces": False,
    }


def _read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def load_split(split="train", data_dir=DATA_DIR):
    """Images as float32 in [-1, 1], shape [N, 28, 28]; labels int64 [N]."""
    prefix = "train" if split == "train" else "t10k"
    x = _read_idx(os.path.join(data_dir, f"{prefix}-images-idx3-ubyte.gz")).astype(np.float32)
    y = _read_idx(os.path.join(data_dir, f"{prefix}-labels-idx1-ubyte.gz")).astype(np.int64)
    return torch.from_numpy(x / 127.5 - 1.0), torch.from_numpy(y)


def batch_ids(id_lists):
    """Right-pad id lists with 0 (padded rows are masked by the model) -> ([B, Lmax], lengths [B])."""
    lens = torch.tensor([len(x) for x in id_lists])
    out = torch.zeros(len(id_lists), int(lens.max()), dtype=torch.long)
    for i, x in enumerate(id_lists):
        out[i, :len(x)] = torch.tensor(x)
    return out, lens


if __name__ == "__main__":
    print(json.dumps({"vocab_size": len(VOCAB), "eos": EOS_ID, "vision_start": VISION_START_ID,
                      "prompts_per_class": [len(p) for p in PROMPTS]}))
    print(WORDS)
