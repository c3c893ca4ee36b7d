"""Pretrain a small BERT on the training tweets with masked-language modelling, for the reduced EA-BERT ablation.

Wang et al. (2021, §4.2, Table 4) add evolving attention to a *pretrained* BERT-Base and fine-tune it on GLUE. No
pretrained checkpoint is available offline, so this script makes a small one from the tweets themselves:

1. a WordPiece vocabulary (``tokenizers``' ``BertWordPieceTokenizer``: lower-cased, 8,000 entries, the specials
   ``[PAD] [UNK] [CLS] [SEP] [MASK]`` first) learned from the **training split only** of
   :func:`~neuralode_tf.data.tweets_raw` (the split of :func:`~neuralode_tf.data.tweets` and of the
   ``ea_bert_tweets`` preset with the same data options: ``--max-samples`` must be the fine-tuning's
   ``data.max_samples``), so no test tweet is seen before the fine-tuning is evaluated;
2. a ``BertForMaskedLM`` (hidden 128, 4 layers, 4 heads, intermediate 512, 128 positions, so that no tweet is cut:
   the longest training tweet has 120 tokens, the mean 30.9; 1,858,752 parameters with the tied 8,000 x 128
   embedding) trained on those tweets with BERT's masked-language-modelling loss (Devlin et al. 2019, §3.1): 15% of
   the non-special tokens are chosen, of which 80% become ``[MASK]``, 10% a random token and 10% stay, and the loss
   is the cross-entropy of the chosen tokens' original ids,
   :math:`L = -\\frac{1}{|M|} \\sum_{i \\in M} \\log p_\\theta(x_i \\mid \\tilde x)`
   (``DataCollatorForLanguageModeling``, fresh masks every batch; the prediction head is applied at the chosen
   positions only, which is ``BertForMaskedLM``'s loss with less work). AdamW, lr 1e-3 with 5% linear warm-up and
   linear decay, weight decay 0.01 (not on biases and layer norms), gradient clipping at 1, batches of 64 tweets
   drawn with replacement by a seeded generator, a fixed number of steps (2,000: 13 passes over the 9,600 tweets);
3. ``save_pretrained`` of the model and the tokenizer to ``--out`` (what ``--set model.checkpoint=`` takes).

The MLM loss is printed at the start and the end on a fixed held batch of 512 training tweets with one fixed
masking (so the two numbers are comparable), and as running means while training.

The recorded checkpoint (``experiments/evolving_attention/README.md``, EA-BERT section)::

    OMP_NUM_THREADS=1 python experiments/evolving_attention/pretrain_bert.py   # --max-samples 12000 --steps 2000

took 14.4 minutes on one thread of the 2-core machine (0.43 s per step; two threads were slower while another job
shared the cores), with the MLM loss 9.00 -> 4.84 on the held batch (6.94 -> 4.78, the first and last 250 steps'
means). The initialisation, the masks and the batches are drawn from ``--seed``.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from neuralode_tf.data import TextSplit, tweets_raw

SPECIALS: list[Any] = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
ARCHITECTURE: dict[str, Any] = dict(
    hidden_size=128, num_hidden_layers=4, num_attention_heads=4, intermediate_size=512, max_position_embeddings=128
)


def training_texts(max_samples: int | None, seed: int = 0) -> list[str]:
    """The training split's tweets of :func:`~neuralode_tf.data.tweets_raw` with these data options (the split
    the ``ea_bert_tweets`` preset fine-tunes on)."""
    train = tweets_raw(max_samples=max_samples, seed=seed).train
    assert isinstance(train, TextSplit)
    return [text for text in train.texts if isinstance(text, str)]


def build_tokenizer(texts: list[str], vocab_size: int, folder: Path, max_length: int) -> Any:
    """A lower-casing WordPiece tokenizer learned from ``texts``, as a ``BertTokenizer`` saved in ``folder`` (in
    transformers 5 the ``tokenizers``-backed one; transformers 4's ``AutoTokenizer`` reads the folder as
    ``BertTokenizerFast``)."""
    from tokenizers.implementations import BertWordPieceTokenizer
    from transformers import BertTokenizer

    wordpiece = BertWordPieceTokenizer(lowercase=True)
    wordpiece.train_from_iterator(iter(texts), vocab_size=vocab_size, special_tokens=SPECIALS, show_progress=False)
    with tempfile.TemporaryDirectory() as vocab_only:  # a folder with vocab.txt alone, as transformers 4 and 5 read it
        wordpiece.save_model(vocab_only)
        tokenizer = BertTokenizer.from_pretrained(vocab_only, model_max_length=max_length)
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer.save_pretrained(folder)
    return tokenizer


def _mlm_loss(model: Any, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """The MLM cross-entropy of ``BertForMaskedLM`` (its ``loss`` for these ``labels``), with the prediction head
    applied at the chosen positions only (the others have label -100 and no loss; 7x less work in the head)."""
    hidden = model.bert(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).last_hidden_state
    chosen = batch["labels"] != -100
    return torch.nn.functional.cross_entropy(model.cls(hidden[chosen]), batch["labels"][chosen])


def _held_batch(collator: Any, encoded: list[dict[str, list[int]]], seed: int) -> dict[str, torch.Tensor]:
    """512 training tweets with one masking drawn from ``seed`` (torch's global generator is restored after)."""
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return collator(encoded[:512])


def pretrain(args: argparse.Namespace) -> None:
    """Build the vocabulary, pretrain ``BertForMaskedLM`` for ``args.steps`` steps and save both to ``args.out``."""
    from transformers import BertConfig, BertForMaskedLM, DataCollatorForLanguageModeling

    start = time.perf_counter()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    texts = training_texts(args.max_samples)
    out = Path(args.out)
    tokenizer = build_tokenizer(texts, args.vocab_size, out, ARCHITECTURE["max_position_embeddings"])
    encoded = [tokenizer(t, truncation=True, max_length=tokenizer.model_max_length) for t in texts]
    encoded = [{"input_ids": e["input_ids"]} for e in encoded]
    lengths = sorted(len(e["input_ids"]) for e in encoded)
    print(
        f"{len(texts)} training tweets, vocabulary {len(tokenizer)}, tokens per tweet: mean "
        f"{sum(lengths) / len(lengths):.1f}, max {lengths[-1]}, cut at {tokenizer.model_max_length}: "
        f"{sum(n == tokenizer.model_max_length for n in lengths)}"
    )
    collator = DataCollatorForLanguageModeling(tokenizer, mlm_probability=0.15)
    held = _held_batch(collator, random.Random(args.seed).sample(encoded, len(encoded)), args.seed + 1)

    config = BertConfig(vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id, **ARCHITECTURE)
    model = BertForMaskedLM(config)
    parameters = sum(p.numel() for p in model.parameters())
    decay = [p for n, p in model.named_parameters() if p.ndim > 1 and "LayerNorm" not in n]
    no_decay = [p for n, p in model.named_parameters() if not (p.ndim > 1 and "LayerNorm" not in n)]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}], lr=args.lr
    )
    warmup = max(1, args.steps // 20)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min((s + 1) / warmup, max(0.0, (args.steps - s) / (args.steps - warmup)))
    )
    with torch.no_grad():
        model.eval()
        held_start = _mlm_loss(model, held).item()
    print(f"BertForMaskedLM {parameters:,} parameters; held-batch MLM loss at the start {held_start:.3f}")

    order = torch.Generator().manual_seed(args.seed)
    model.train()
    running: list[float] = []
    for step in range(args.steps):
        rows = torch.randint(len(encoded), (args.batch_size,), generator=order).tolist()
        loss = _mlm_loss(model, collator([encoded[i] for i in rows]))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        running.append(loss.item())
        if (step + 1) % args.log_every == 0:
            window = running[-args.log_every :]
            elapsed = time.perf_counter() - start
            print(f"step {step + 1:>5}  MLM loss {sum(window) / len(window):.3f}  {elapsed:.0f} s", flush=True)
    with torch.no_grad():
        model.eval()
        held_end = _mlm_loss(model, held).item()
    model.save_pretrained(out)
    minutes = (time.perf_counter() - start) / 60
    first, last = (sum(window) / len(window) for window in (running[: args.log_every], running[-args.log_every :]))
    print(f"held-batch MLM loss {held_start:.3f} -> {held_end:.3f}; first/last {args.log_every} steps' mean ", end="")
    print(f"{first:.3f} -> {last:.3f}")
    print(f"saved to {out} in {minutes:.1f} minutes")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="runs/pretrained/bert_tweets_small", help="the checkpoint folder to write")
    parser.add_argument("--max-samples", type=int, default=12_000, help="the fine-tuning's data.max_samples")
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--vocab-size", type=int, default=8000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--log-every", type=int, default=250)
    pretrain(parser.parse_args())


if __name__ == "__main__":
    main()
