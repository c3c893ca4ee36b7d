"""GLUE from its TSV files (tiny files in GLUE's layout, written here), its metrics against scikit-learn and SciPy,
and the ``ea_bert_glue`` preset fine-tuning a saved checkpoint on CoLA, MRPC (sentence pairs) and STS-B (a
regression) through the command line."""

from __future__ import annotations

import json
import math

import pytest
import torch

from neuralode_tf.data import GLUE_TASKS, DatasetFormatError, DatasetNotFoundError, Splits, TextSplit, load, load_glue
from neuralode_tf.train import METRICS, TrainConfig, summarize
from neuralode_tf.train.cli import main
from neuralode_tf.train.presets import PRESETS, VARIANTS
from neuralode_tf.train.setup import Setup, build_setup
from tests._huggingface import save_tiny_bert, transformers

pytestmark = pytest.mark.cpu_only("reads files written here and fine-tunes a tiny saved checkpoint")

WORDS = [
    "the",
    "cat",
    "sat",
    "on",
    "a",
    "mat",
    "dog",
    "ran",
    "fast",
    "slow",
    "he",
    "she",
    "it",
    "is",
    "was",
    "not",
    "very",
    "good",
    "bad",
    "big",
    "small",
    "red",
    "blue",
]
SHORT = ["epochs=1", "batch_size=4", "max_steps=3", "lr=1e-3", "eval_batch_size=8", "progress=false"]


def _sentence(generator: torch.Generator, quote: bool = False) -> str:
    words = [
        WORDS[i]
        for i in torch.randint(len(WORDS), (int(torch.randint(3, 9, (1,), generator=generator)),), generator=generator)
    ]
    return ('"' if quote else "") + " ".join(words) + "."


def _write(path, header: list[str] | None, rows: list[list[str]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = ([header] if header else []) + rows
    path.write_text("".join("\t".join(row) + "\n" for row in lines), encoding="utf-8")


def write_glue(root, n: int = 24, seed: int = 0) -> None:
    """Every task's files in GLUE's layout under ``root/glue_data``: ``n`` rows each, labels cycling over the
    task's values (STS-B: scores ``i / 5 mod 5``), a quoted sentence in each file (read verbatim)."""
    g = torch.Generator().manual_seed(seed)
    glue = root / "glue_data"
    mnli = [
        "index",
        "promptID",
        "pairID",
        "genre",
        "sentence1_binary_parse",
        "sentence2_binary_parse",
        "sentence1_parse",
        "sentence2_parse",
        "sentence1",
        "sentence2",
        "label1",
        "gold_label",
    ]
    for split in ("train", "dev", "dev_matched", "dev_mismatched"):
        s = [[_sentence(g, quote=i == 0), _sentence(g)] for i in range(n)]
        if split in ("train", "dev"):
            _write(
                glue / "CoLA" / f"{split}.tsv",
                None,
                [["gj04", "01"[i % 2], "" if i % 2 else "*", a] for i, (a, _) in enumerate(s)],
            )
            _write(
                glue / "SST-2" / f"{split}.tsv", ["sentence", "label"], [[a, "01"[i % 2]] for i, (a, _) in enumerate(s)]
            )
            _write(
                glue / "MRPC" / f"{split}.tsv",
                ["Quality", "#1 ID", "#2 ID", "#1 String", "#2 String"],
                [["01"[i % 2], str(i), str(i + 1), a, b] for i, (a, b) in enumerate(s)],
            )
            _write(
                glue / "STS-B" / f"{split}.tsv",
                [
                    "index",
                    "genre",
                    "filename",
                    "year",
                    "old_index",
                    "source1",
                    "source2",
                    "sentence1",
                    "sentence2",
                    "score",
                ],
                [[str(i), "g", "f", "2012", str(i), "s", "s", a, b, f"{i / 5 % 5:.3f}"] for i, (a, b) in enumerate(s)],
            )
            _write(
                glue / "QQP" / f"{split}.tsv",
                ["id", "qid1", "qid2", "question1", "question2", "is_duplicate"],
                [[str(i), "1", "2", a, b, "01"[i % 2]] for i, (a, b) in enumerate(s)],
            )
            for task, labels in (
                ("QNLI", ("entailment", "not_entailment")),
                ("RTE", ("entailment", "not_entailment")),
                ("WNLI", ("0", "1")),
            ):
                header = (
                    ["index", "question", "sentence", "label"]
                    if task == "QNLI"
                    else ["index", "sentence1", "sentence2", "label"]
                )
                _write(
                    glue / task / f"{split}.tsv", header, [[str(i), a, b, labels[i % 2]] for i, (a, b) in enumerate(s)]
                )
        if split != "dev":
            gold = ("entailment", "neutral", "contradiction")
            _write(
                glue / "MNLI" / f"{split}.tsv",
                mnli,
                [
                    [str(i), "0", "0", split, "(", "(", "(", "(", a, b, gold[i % 3], gold[i % 3]]
                    for i, (a, b) in enumerate(s)
                ],
            )


@pytest.fixture(scope="module")
def glue_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("glue")
    write_glue(root)
    return root


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return save_tiny_bert(tmp_path_factory.mktemp("tiny-bert"), WORDS + [".", '"'])


def test_every_task_reads_its_columns_labels_and_metrics(glue_root):
    pairs = {"mrpc", "stsb", "qqp", "mnli", "mnli_mismatched", "qnli", "rte", "wnli"}
    for task, spec in GLUE_TASKS.items():
        data = load("glue", root=glue_root, task=task)
        assert data.kind == "text" and data.classes == spec.classes and data.metrics == spec.metrics
        assert (len(data.train), len(data.test)) == (24, 24) and "24 train / 24" in data.description
        assert data.train.pairs == (task in pairs)
        first = data.train.texts[0]
        assert (first[0] if task in pairs else first).startswith('"')  # quotes are text (QUOTE_NONE)
        if task == "stsb":
            assert data.classes is None and data.train.y.dtype == torch.float32
            assert data.train.y[:6].tolist() == pytest.approx([0.0, 0.2, 0.4, 0.6, 0.8, 1.0])
        else:
            cycle = 3 if task.startswith("mnli") else 2
            labels = [i % cycle for i in range(24)]
            if task == "qnli" or task == "rte":  # entailment first, as in the file
                assert data.classes == ("entailment", "not_entailment")
            assert data.train.y.tolist() == labels
    assert load_glue(glue_root / "glue_data", "mnli").test.texts != load_glue(glue_root, "mnli_mismatched").test.texts
    hugging_face_label_names = {  # the class names of Hugging Face's GLUE configurations, in id order
        "cola": ("unacceptable", "acceptable"),
        "sst2": ("negative", "positive"),
        "mrpc": ("not_equivalent", "equivalent"),
        "stsb": None,
        "qqp": ("not_duplicate", "duplicate"),
        "mnli": ("entailment", "neutral", "contradiction"),
        "mnli_mismatched": ("entailment", "neutral", "contradiction"),
        "qnli": ("entailment", "not_entailment"),
        "rte": ("entailment", "not_entailment"),
        "wnli": ("not_entailment", "entailment"),
    }
    assert {task: spec.classes for task, spec in GLUE_TASKS.items()} == hugging_face_label_names
    assert [task for task, spec in GLUE_TASKS.items() if not spec.header] == ["cola"]
    assert GLUE_TASKS["cola"].metrics == ("matthews",) and GLUE_TASKS["mrpc"].metrics == ("f1", "accuracy")
    assert GLUE_TASKS["stsb"].metrics == ("pearson", "spearman") and GLUE_TASKS["qqp"].metrics == ("f1", "accuracy")


def test_max_samples_keeps_a_seeded_subset_of_the_training_set(glue_root):
    whole = load_glue(glue_root, "rte")
    a, b, c = (load_glue(glue_root, "rte", max_samples=10, seed=s) for s in (0, 0, 1))
    assert len(a.train) == 10 and a.train.texts == b.train.texts and a.train.texts != c.train.texts
    assert set(a.train.texts) <= set(whole.train.texts) and a.test.texts == whole.test.texts


def test_missing_and_malformed_files_are_clear_errors(tmp_path, glue_root):
    with pytest.raises(ValueError, match="unknown GLUE task 'cola2'; choose from cola, sst2"):
        load_glue(glue_root, "cola2")
    with pytest.raises(DatasetNotFoundError, match="CoLA; expected glue_data/<Task>/"):
        load_glue(tmp_path, "cola")
    write_glue(tmp_path, n=6)
    folder = tmp_path / "glue_data"
    (folder / "RTE" / "dev.tsv").unlink()
    with pytest.raises(DatasetNotFoundError, match="RTE/dev.tsv; expected"):
        load_glue(tmp_path, "rte")
    _write(folder / "SST-2" / "dev.tsv", ["text", "label"], [["a", "0"]])
    with pytest.raises(DatasetFormatError, match="no column 'sentence' in the header"):
        load_glue(tmp_path, "sst2")
    _write(folder / "QNLI" / "dev.tsv", ["index", "question", "sentence", "label"], [["0", "a", "b", "contradiction"]])
    with pytest.raises(DatasetFormatError, match="label 'contradiction' is not one of entailment, not_entailment"):
        load_glue(tmp_path, "qnli")
    _write(folder / "STS-B" / "dev.tsv", ["sentence1", "sentence2", "score"], [["a", "b", "high"]])
    with pytest.raises(DatasetFormatError, match="a score is not a number"):
        load_glue(tmp_path, "stsb")
    (folder / "WNLI" / "dev.tsv").write_text("")
    with pytest.raises(DatasetFormatError, match="WNLI/dev.tsv is empty"):
        load_glue(tmp_path, "wnli")
    header = ["id", "qid1", "qid2", "question1", "question2", "is_duplicate"]
    good = [[str(i), "1", "2", "a", "b", "01"[i % 2]] for i in range(2000)]
    _write(folder / "QQP" / "train.tsv", header, good + [["7", "1", "2", "a broken line"]])  # 1 in 2,001: skipped
    data = load_glue(tmp_path, "qqp")
    assert len(data.train) == 2000 and "1 malformed rows skipped" in data.description
    _write(folder / "QQP" / "train.tsv", header, good[:10] + [["7", "1", "2", "a broken line"]])
    with pytest.raises(DatasetFormatError, match="1 of 11 rows have fewer than 6 fields"):
        load_glue(tmp_path, "qqp")


def test_the_metrics_equal_scikit_learn_and_scipy():
    sklearn_metrics = pytest.importorskip("sklearn.metrics")
    stats = pytest.importorskip("scipy.stats")
    g = torch.Generator().manual_seed(0)
    for trial in range(20):
        n, classes = int(torch.randint(2, 60, (1,), generator=g)), 2 + trial % 3
        p, t = torch.randint(classes, (n,), generator=g), torch.randint(classes, (n,), generator=g)
        assert METRICS["accuracy"](p, t) == pytest.approx(sklearn_metrics.accuracy_score(t, p), abs=1e-15)
        assert METRICS["matthews"](p, t) == pytest.approx(sklearn_metrics.matthews_corrcoef(t, p), abs=1e-12)
        if classes == 2:
            assert METRICS["f1"](p, t) == pytest.approx(sklearn_metrics.f1_score(t, p, zero_division=0), abs=1e-12)
        x, y = torch.randn(n, generator=g), torch.randint(6, (n,), generator=g).float()  # ties in y
        x[: n // 3] = x[0]  # and in x
        reference = x.double().numpy(), y.double().numpy()
        assert METRICS["pearson"](x, y) == pytest.approx(stats.pearsonr(*reference)[0], abs=1e-12)
        assert METRICS["spearman"](x, y) == pytest.approx(stats.spearmanr(*reference)[0], abs=1e-12)
    same = torch.ones(5, dtype=torch.long)
    assert METRICS["matthews"](same, torch.tensor([0, 1, 0, 1, 1])) == 0.0  # one predicted class: 0, as sklearn
    assert METRICS["f1"](torch.zeros(4, dtype=torch.long), torch.zeros(4, dtype=torch.long)) == 0.0
    assert METRICS["matthews"](torch.tensor([0, 1, 1, 0]), torch.tensor([0, 1, 1, 0])) == 1.0
    assert math.isnan(METRICS["pearson"](torch.ones(4), torch.arange(4.0)))  # a constant: NaN


def test_a_regression_task_takes_the_mean_squared_error():
    split = TextSplit(["a", "b", "c"], torch.tensor([0.5, 2.0, 4.0]))
    setup = Setup(torch.nn.Identity(), Splits("glue", "text", split, split, "stsb", metrics=("pearson", "spearman")))
    logits = torch.tensor([[1.0], [2.0], [3.5]])
    assert setup.regression and setup.loss(logits, split.y).item() == pytest.approx((0.25 + 0 + 0.25) / 3)
    assert torch.equal(setup.predictions(logits), logits[:, 0]) and math.isnan(setup.accuracy(logits, split.y))
    with pytest.raises(ValueError, match="one target per text, got 2 texts and 3"):
        TextSplit(["a", "b"], split.y)
    with pytest.raises(ValueError, match="strings or pairs of strings, got"):
        TextSplit([("a", "b", "c")], split.y[:1])


def test_pairs_reach_the_model_as_bert_segments(glue_root, checkpoint):
    """A pair is tokenised as ``[CLS] a [SEP] b [SEP]`` with segment ids 0 and 1: the converted checkpoint's logits
    are the Hugging Face model's on the tokenizer's encoding of the pairs."""
    lib = transformers()
    data = load_glue(glue_root, "mrpc")
    torch.manual_seed(0)
    model = PRESETS["ea_bert_glue"].build_model(data, {"checkpoint": str(checkpoint), "variant": "vanilla"}).eval()
    pairs = data.train.texts[:5]
    encoded = model.tokenizer([a for a, _ in pairs], [b for _, b in pairs], padding=True, return_tensors="pt")
    first = encoded["input_ids"][0][encoded["attention_mask"][0].bool()].tolist()
    cls, sep = model.tokenizer.cls_token_id, model.tokenizer.sep_token_id
    middle = first.index(sep)
    assert first[0] == cls and first[-1] == sep and first.count(sep) == 2  # [CLS] a [SEP] b [SEP]
    segments = encoded["token_type_ids"][0][: len(first)].tolist()
    assert segments == [0] * (middle + 1) + [1] * (len(first) - middle - 1)
    hf = model.converted.hf_model
    assert isinstance(hf, lib.BertForSequenceClassification) and hf.num_labels == 2
    with torch.no_grad():
        difference = (model(pairs) - hf(**encoded).logits).abs().max().item()
    assert difference <= 1e-5, difference
    assert model.max_length == 128
    model.max_length = 6  # pairs truncated longest-first: the longer text loses its tokens first
    short = model.tokenizer(
        [a for a, _ in pairs],
        [b for _, b in pairs],
        padding=True,
        truncation="longest_first",
        max_length=6,
        return_tensors="pt",
    )
    assert short["input_ids"].shape[-1] == 6
    with torch.no_grad():
        assert (model(pairs) - hf(**short).logits).abs().max().item() <= 1e-5
    with pytest.raises(ValueError, match="texts or pairs of texts, not both"):
        model([pairs[0], "one text"])


@pytest.mark.parametrize(
    ("task", "metrics"), [("cola", ["matthews"]), ("mrpc", ["f1", "accuracy"]), ("stsb", ["pearson", "spearman"])]
)
def test_the_cli_fine_tunes_a_saved_checkpoint_on_a_glue_task(glue_root, checkpoint, tmp_path, capsys, task, metrics):
    out = tmp_path / "run"
    argv = ["train", "ea_bert_glue", "--out-dir", str(out), "--set", f"model.checkpoint={checkpoint}"]
    assert main([*argv, f"data.root={glue_root}", f"data.task={task}", *SHORT]) == 0
    result = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert result["metrics"] == metrics and result["steps"] == 3 and math.isfinite(result["final_loss"])
    assert all(-1.0 <= result[f"test_{name}"] <= 1.0 for name in metrics)
    assert math.isnan(result["test_accuracy"]) == (task == "stsb")
    config = TrainConfig(
        "ea_bert_glue", model={"checkpoint": str(checkpoint)}, data={"root": str(glue_root), "task": task}
    )
    model = build_setup(config).model
    assert model.converted.hf_model.num_labels == (1 if task == "stsb" else 2)


def test_compare_judges_the_variants_by_the_main_metric(glue_root, checkpoint, tmp_path):
    argv = ["compare", "ea_bert_glue", "--seeds", "0", "--variants", "vanilla", "ea", "--out-dir", str(tmp_path)]
    argv += ["--set", f"model.checkpoint={checkpoint}", f"data.root={glue_root}", "data.task=cola", *SHORT]
    assert main(argv) == 0
    rows = json.loads((tmp_path / "rows.json").read_text())
    assert [list(row["scores"]) for row in rows] == [["matthews", "accuracy"]] * 2
    table = summarize(rows)
    assert [entry["metric"] for entry in table] == ["matthews", "matthews"]
    assert [entry["mean"] for entry in table] == [100 * row["scores"]["matthews"] for row in rows]
    assert VARIANTS["ea_bert_glue"] == VARIANTS["ea_bert_tweets"]
    assert "test matthews (x 100)" in (tmp_path / "table.md").read_text()


def test_the_preset_needs_the_glue_folder(checkpoint, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["train", "ea_bert_glue", "--out-dir", str(tmp_path / "run"), "--set", f"model.checkpoint={checkpoint}"])
    message = "dataset 'glue' is read from files: give their folder with --set data.root=PATH"
    assert exit_.value.code == 2 and message in capsys.readouterr().err and not (tmp_path / "run").exists()
    config = PRESETS["ea_bert_glue"].config
    assert (config.lr, config.batch_size, config.epochs) == (2e-5, 16, 3)  # §4.2's grid
    assert (config.warmup_steps, config.warmup_epochs, config.weight_decay, config.grad_clip) == (0, 0, 0.01, 1.0)
    assert PRESETS["ea_bert_glue"].dataset_options == {"task": "cola"}
