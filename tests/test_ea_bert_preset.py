"""The EA-BERT preset fine-tunes a local checkpoint folder (a small random BERT and a WordPiece tokenizer of frequent
tweet words, written here with ``save_pretrained``) through the command line; its variants are Table 4's models; the
tweets as raw text are the tweets of ``tweets``; and a missing checkpoint is a clear error."""

from __future__ import annotations

import csv
import json
import math
from collections import Counter

import pytest
import torch

from neuralode_tf.data import Splits, TextSplit, text, tweets, tweets_raw
from neuralode_tf.data.text import tokenize
from neuralode_tf.models.converters.huggingface import EvolvingTransformersStack
from neuralode_tf.train import TrainConfig, load_checkpoint
from neuralode_tf.train.cli import main
from neuralode_tf.train.presets import PRESETS, VARIANTS
from neuralode_tf.train.setup import build_setup
from tests._huggingface import save_tiny_bert, transformers

pytestmark = pytest.mark.cpu_only("fine-tunes a tiny saved checkpoint through the CLI for a few steps")

SHORT = ["epochs=1", "batch_size=8", "max_steps=3", "warmup_steps=0", "lr=1e-3", "eval_batch_size=32"]
SHORT += ["data.max_samples=120"]


@pytest.fixture(scope="module", autouse=True)
def _tweets_read_once():
    """The CSV is read once for the module (each loader reads it again otherwise, ~2 s)."""
    texts, labels = text._read_tweets()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(text, "_read_tweets", lambda: (texts, labels))  # what both loaders read
        yield


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A folder as ``save_pretrained`` writes it: a random BertModel (d=32, 2 blocks, 4 heads) and a WordPiece
    tokenizer whose vocabulary is the specials and the 400 most frequent words of the tweets."""
    words = Counter(word for tweet in text._read_tweets()[0][:5000] for word in tokenize(tweet))
    return save_tiny_bert(tmp_path_factory.mktemp("tiny-bert"), [word for word, _ in words.most_common(400)])


def test_the_raw_tweets_are_the_tweets_with_the_same_split():
    for options in (dict(max_samples=300, seed=1), dict(max_samples=300, seed=2, binary=True)):
        raw, tokens = tweets_raw(**options), tweets(**options)
        assert raw.kind == "text" and raw.classes == tokens.classes and raw.metrics == ("accuracy",)
        for split, reference in ((raw.train, tokens.train), (raw.test, tokens.test)):
            assert torch.equal(split.y, reference.y) and not split.pairs
            for row, words in zip(split.texts, reference.x, strict=True):
                assert tokens.vocab.encode(tokenize(row))[:48] == words[words != 0].tolist()
    texts = text._read_tweets()[0]
    assert max(len(t.encode("latin-1")) for t in texts) == 320 and round(sum(map(len, texts)) / len(texts)) == 104
    whole = tweets_raw()  # the preset's data: 3,814 steps of 16 in 2 epochs
    assert (len(whole.train), len(whole.test)) == (30_526, 7_632)
    config = PRESETS["ea_bert_tweets"].config
    assert config.epochs * (len(whole.train) // config.batch_size) == 3_814 and config.warmup_steps == 380


def test_the_cli_fine_tunes_a_saved_checkpoint(checkpoint, tmp_path, capsys):
    out = tmp_path / "run"
    argv = ["train", "ea_bert_tweets", "--out-dir", str(out), "--set", f"model.checkpoint={checkpoint}", *SHORT]
    assert main([*argv, "progress=false"]) == 0
    result = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert math.isfinite(result["final_loss"]) and 0.0 <= result["test_accuracy"] <= 1.0 and result["steps"] == 3
    history = load_checkpoint(out / "checkpoint.pt", "cpu")["history"]
    assert len(history) == 3 and all(math.isfinite(row["loss"]) for row in history)
    assert json.loads((out / "metrics.json").read_text())["test_accuracy"] == result["test_accuracy"]
    with open(out / "metrics.csv", newline="") as handle:
        assert [math.isfinite(float(row["loss"])) for row in csv.DictReader(handle)] == [True] * 3
    trained = load_checkpoint(out / "checkpoint.pt", "cpu")["model"]
    config = TrainConfig("ea_bert_tweets", model={"checkpoint": str(checkpoint)}, data={"max_samples": 120})
    torch.manual_seed(config.seed)  # the run's initialisation: the new head and convolutions
    initial = build_setup(config).model.state_dict()
    assert initial.keys() == trained.keys()
    changed = {name for name in initial if not torch.equal(initial[name], trained[name])}
    query = "converted.hf_model.bert.encoder.layer.0.attention.self.query.weight"
    assert {query, "converted.hf_model.classifier.weight"} <= changed
    assert {name for name in initial if ".conv." in name} <= changed
    assert len({name for name in initial if ".conv." in name}) == 2  # one 3x3 convolution (weight, bias): block 1


def test_compare_runs_the_table_4_variants(checkpoint, tmp_path, capsys):
    argv = ["compare", "ea_bert_tweets", "--seeds", "0", "--variants", "vanilla", "no_skip"]
    argv += ["--out-dir", str(tmp_path), "--set", f"model.checkpoint={checkpoint}", *SHORT]
    assert main(argv) == 0
    rows = json.loads((tmp_path / "rows.json").read_text())
    assert [row["variant"] for row in rows] == ["vanilla", "no_skip"] and not any(row["non_finite"] for row in rows)
    assert rows[1]["parameters"] - rows[0]["parameters"] == 4 * 4 * 9 + 4  # the convolution of block 1
    assert "no_skip" in capsys.readouterr().out


def test_the_variants_are_table_4s_models(checkpoint):
    split = TextSplit(["a", "b"], torch.zeros(2, dtype=torch.long))
    data = Splits("tweets_raw", "text", split, split, "placeholder", classes=("a", "b", "c"))
    expected = {
        "vanilla": None,
        "ea": (0.1, 0.1, 3),
        "no_convolution": (0.1, 0.0, 3),
        "no_skip": (0.0, 0.1, 3),
        "kernel_1x1": (0.1, 0.1, 1),
        "kernel_5x5": (0.1, 0.1, 5),
    }
    assert VARIANTS["ea_bert_tweets"] == {name: {"variant": name} for name in expected}
    for name, settings in expected.items():
        model = PRESETS["ea_bert_tweets"].build_model(data, {"checkpoint": str(checkpoint), "variant": name})
        field = model.converted.encoder.field
        if settings is None:
            assert not isinstance(field, EvolvingTransformersStack)
            continue
        second = field.attentions[1]
        assert (second.alpha, second.beta, second.kernel_size) == settings and field.attentions[0].conv is None
    texts = ["so happy :) today", "bad"]
    for max_length in (128, 4):  # tokenised by the checkpoint's tokenizer, padded to the longest, truncated
        model.max_length = max_length
        encoded = model.tokenizer(texts, padding=True, truncation=True, max_length=max_length, return_tensors="pt")
        assert encoded["input_ids"].shape[-1] == (7 if max_length == 128 else 4)
        with torch.no_grad():
            assert torch.equal(model(texts), model.converted(encoded["input_ids"], encoded["attention_mask"]))
    with pytest.raises(ValueError, match="unknown variant 'nope'; valid: vanilla, ea"):
        PRESETS["ea_bert_tweets"].build_model(data, {"checkpoint": str(checkpoint), "variant": "nope"})


def test_a_missing_checkpoint_names_the_expected_folder(checkpoint, tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    cases = {
        None: "give it with --set model.checkpoint=PATH, a folder written by save_pretrained: config.json",
        tmp_path / "absent": f"model.checkpoint: no folder {tmp_path / 'absent'}; expected a folder written by",
        tmp_path / "empty": f"model.checkpoint: no config.json in {tmp_path / 'empty'}; expected",
    }
    for path, message in cases.items():
        given = [] if path is None else [f"model.checkpoint={path}"]
        with pytest.raises(SystemExit) as exit_:
            main(["train", "ea_bert_tweets", "--out-dir", str(tmp_path / "run"), "--set", *given, *SHORT])
        assert exit_.value.code == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "run").exists()
    assert main(["train", "ea_bert_tweets", "--describe", "--set", f"model.checkpoint={checkpoint}"]) == 0
    described = capsys.readouterr().out
    assert "PretrainedTextClassifier" in described and "max_length" in described and "tweets_raw" in described


def test_a_checkpoint_with_a_head_of_that_size_keeps_it(checkpoint, tmp_path):
    """A head for the tweets' 3 classes is the checkpoint's; a checkpoint without one gets a new head, drawn from
    torch's random state (so from the run's seed)."""
    lib = transformers()
    folder = tmp_path / "classifier"
    torch.manual_seed(1)
    saved = lib.BertForSequenceClassification(lib.BertConfig.from_pretrained(checkpoint, num_labels=3))
    saved.save_pretrained(folder)
    lib.AutoTokenizer.from_pretrained(checkpoint).save_pretrained(folder)
    split = TextSplit(["a", "b"], torch.zeros(2, dtype=torch.long))
    data = Splits("tweets_raw", "text", split, split, "placeholder", classes=("a", "b", "c"))
    heads = []
    for path, seed in ((folder, 5), (checkpoint, 5), (checkpoint, 5), (checkpoint, 6)):
        torch.manual_seed(seed)
        model = PRESETS["ea_bert_tweets"].build_model(data, {"checkpoint": str(path)})
        heads.append(model.converted.hf_model.classifier.weight.detach())
    assert torch.equal(heads[0], saved.classifier.weight.detach())
    assert torch.equal(heads[1], heads[2]) and not torch.equal(heads[1], heads[3])
