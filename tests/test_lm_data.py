"""Language-modelling data: the offline character corpus, the contiguous split, the windows (nanoGPT's get_batch)
and the readers of tiny Shakespeare and nanoGPT's OpenWebText shards, on small files written here."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
import torch
from torch import nn

from neuralode_tf.data import (
    DATASETS,
    STAND_INS,
    DatasetFormatError,
    DatasetNotFoundError,
    TokenWindows,
    load,
    load_openwebtext,
    load_shakespeare_char,
    tweets_char,
    tweets_text,
)
from neuralode_tf.data.text import _read_tweets
from neuralode_tf.train.setup import Setup

pytestmark = pytest.mark.cpu_only("data loading, no accelerator")


@pytest.fixture(scope="module")
def text() -> str:
    return tweets_text()


@pytest.fixture(scope="module")
def corpus():
    return tweets_char(block_size=16, windows=64)


def test_the_offline_corpus_is_a_fixed_text(text):
    assert len(text) == 3_996_191 and text.count("\n") == 38_157  # 38,158 tweets joined with newlines
    assert len(set(text)) == 176
    _, labels = _read_tweets()
    assert labels == sorted(labels)  # the CSV is ordered by sentiment: the validation tenth is positive tweets
    assert hashlib.sha256(text.encode("utf-8")).hexdigest() == (
        "555f78bd410268bf89b33cb3f7a2929649705bebb28ee394b8c094c9412ef693"
    )


def test_the_split_is_contiguous_and_the_vocabulary_is_the_train_texts(text, corpus):
    cut = int(len(text) * 0.9)
    assert cut == 3_596_571 and len(corpus.train.tokens) == cut and len(corpus.test.tokens) == len(text) - cut
    vocab, seen = corpus.vocab, set(text[:cut])
    assert vocab.itos == ("<pad>", "<unk>", *sorted(seen))
    assert "".join(vocab.decode(corpus.train.tokens.tolist())) == text[:cut]
    val = vocab.decode(corpus.test.tokens.tolist())
    differ = [(c, t) for c, t in zip(text[cut:], val, strict=True) if t != c]
    assert differ == [(c, "<unk>") for c in text[cut:] if c not in seen]  # characters only in val, and only they
    assert len(differ) == 29 and "29 validation characters are <unk>" in corpus.description
    assert corpus.kind == "lm" and corpus.train.vocab_size == len(vocab) == 177
    assert "tweets_char" in STAND_INS and load("tweets_char", block_size=16, windows=64).description == (
        corpus.description
    )


def test_training_windows_are_random_contiguous_and_seeded_by_seed_and_epoch():
    tokens = np.arange(40, dtype=np.int64)
    split = TokenWindows(tokens, 8, 40, windows=500, seed=3)
    rows = torch.arange(500)
    windows = split.windows(rows, epoch=0)
    assert windows.shape == (500, 9) and windows.dtype == torch.long
    assert torch.equal(windows, windows[:, :1] + torch.arange(9))  # contiguous: start, start + 1, ...
    starts = windows[:, 0]
    assert starts.min() == 0 and starts.max() == 40 - 8 - 1  # nanoGPT: randint(len(data) - block_size)
    assert torch.equal(split.windows(rows, epoch=0), TokenWindows(tokens, 8, 40, windows=500, seed=3).windows(rows))
    assert not torch.equal(split.windows(rows, epoch=1), windows)  # another epoch, other windows
    assert not torch.equal(TokenWindows(tokens, 8, 40, windows=500, seed=4).windows(rows), windows)
    assert torch.equal(split.windows(rows[[7, 3]], epoch=0), windows[[7, 3]])  # a row is the same window in a batch
    assert torch.equal(split[7], windows[7]) and len(split) == 500


def test_validation_windows_tile_the_text_so_every_token_but_the_first_is_one_target():
    tokens = np.arange(30, dtype=np.int64)
    split = TokenWindows(tokens, 4, 30)
    assert len(split) == (30 - 1) // 4 == 7
    windows = split.windows(torch.arange(len(split)), epoch=5)  # the epoch does not matter
    assert torch.equal(windows[:, 0], torch.arange(0, 28, 4))
    assert torch.equal(windows[:, 1:].reshape(-1), torch.arange(1, 29))  # targets 1 .. 28, each once; 29 left out


def test_a_batch_is_the_window_with_targets_shifted_by_one(corpus):
    setup = Setup(model=nn.Identity(), data=corpus)
    rows = torch.tensor([5, 2, 9])
    inputs, target = setup.batch(corpus.train, rows, torch.device("cpu"), epoch=2)
    windows = corpus.train.windows(rows, epoch=2)
    assert list(inputs) == ["tokens"] and inputs["tokens"].shape == target.shape == (3, 16)
    assert torch.equal(inputs["tokens"], windows[:, :-1]) and torch.equal(target, windows[:, 1:])
    assert torch.equal(target[:, :-1], inputs["tokens"][:, 1:])
    assert setup.count(target) == 48
    val_inputs, _ = setup.batch(corpus.test, torch.tensor([0]), torch.device("cpu"))
    assert torch.equal(val_inputs["tokens"][0], torch.from_numpy(corpus.test.tokens[:16]))


def test_load_shakespeare_char_reads_input_txt(tmp_path):
    text = "First Citizen:\nBefore we proceed any further, hear me speak.\n" * 20 + "Zounds! Quoth he, XV."
    folder = tmp_path / "shakespeare_char"
    folder.mkdir()
    (folder / "input.txt").write_text(text, encoding="utf-8")
    for root in (folder, tmp_path):  # the folder or its parent
        splits = load_shakespeare_char(root, block_size=8, windows=10)
        cut = int(len(text) * 0.9)
        assert "".join(splits.vocab.decode(splits.train.tokens)) == text[:cut]
        unseen = sum(c not in text[:cut] for c in text[cut:])
        assert unseen > 0 and f"{unseen} validation characters are <unk>" in splits.description
        assert splits.name == "shakespeare_char" and len(splits.train) == 10 and splits.train.block_size == 8
    assert DATASETS["shakespeare_char"] is load_shakespeare_char
    with pytest.raises(DatasetNotFoundError, match=r"input\.txt"):
        load_shakespeare_char(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DatasetNotFoundError, match=r"input\.txt"):
        load_shakespeare_char(tmp_path / "empty")


def test_load_openwebtext_reads_uint16_shards_with_memmap(tmp_path):
    (np.arange(3000, dtype=np.uint16) * 17).tofile(tmp_path / "train.bin")  # ids up to 50,983 need 16 bits
    np.arange(100, dtype=np.uint16).tofile(tmp_path / "val.bin")
    splits = load_openwebtext(tmp_path, block_size=16, windows=32, seed=1)
    assert isinstance(splits.train.tokens, np.memmap) and splits.train.tokens.dtype == np.uint16
    windows = splits.train.windows(torch.arange(32), epoch=0)
    assert torch.equal(windows, windows[:, :1] + 17 * torch.arange(17)) and windows.dtype == torch.long
    assert windows.max() > 2**15  # read as unsigned
    assert len(splits.test) == 99 // 16 and torch.equal(splits.test[0], torch.arange(17))
    assert splits.vocab is None and splits.train.vocab_size == 50257 and DATASETS["openwebtext"] is load_openwebtext


def test_openwebtext_errors_name_the_layout(tmp_path):
    np.arange(100, dtype=np.uint16).tofile(tmp_path / "train.bin")
    with pytest.raises(DatasetNotFoundError, match=r"val\.bin"):
        load_openwebtext(tmp_path)
    (tmp_path / "val.bin").write_bytes(b"")
    with pytest.raises(DatasetFormatError, match="empty.*uint16 GPT-2 token ids"):
        load_openwebtext(tmp_path, block_size=8)
    (tmp_path / "val.bin").write_bytes(b"\x01\x00\x02")
    with pytest.raises(DatasetFormatError, match="multiple"):
        load_openwebtext(tmp_path, block_size=8)


def test_bad_windows_and_splits_are_refused():
    tokens = np.arange(10)
    with pytest.raises(DatasetFormatError, match="at least block_size \\+ 1 = 11 tokens"):
        TokenWindows(tokens, 10, 10)
    with pytest.raises(DatasetFormatError, match="1-D"):
        TokenWindows(tokens.reshape(2, 5), 2, 10)
    for bad in ({"block_size": 0}, {"vocab_size": 0}, {"windows": 0}, {"block_size": True}):
        with pytest.raises(ValueError, match=f"{next(iter(bad))} must be a positive int"):
            TokenWindows(tokens, **{"block_size": 4, "vocab_size": 10, **bad})
    from neuralode_tf.data.corpus import char_corpus

    with pytest.raises(ValueError, match="val_fraction must lie in"):
        char_corpus("abcdefgh" * 4, name="x", source="y", block_size=2, windows=2, val_fraction=1.0)
