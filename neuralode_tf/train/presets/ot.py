"""The OT-Transformer presets (Kan et al. 2025): the paper's four experiments and their offline stand-ins.

Each task has two presets whose models are registered configurations of one architecture (the ``ot`` variant,
:func:`~neuralode_tf.models.create_model`) and the same five (MNIST: three) variants of :data:`OT_VARIANTS`:

* a **paper preset** on the real data (``data.root=`` the files), with Appendix B's sizes, Euler steps,
  ``λ``, epochs, learning rate (and its step decays) and batch size: ``ot_mnist``, ``ot_catsdogs``,
  ``ot_imdb``, ``ot_modelnet40``. Their transformer blocks have the parameter counts of Tables 1-4
  (``tests/test_ot_paper.py``);
* a **stand-in** on offline data with the same architecture at smaller sizes and its own training
  settings, to run on a CPU in minutes: ``ot_mnist_digits`` (digits), ``ot_imdb_tweets`` (tweets),
  ``ot_modelnet40_shapes3d`` (shapes3d). Their steps and ``λ`` are the paper's; nothing else is.

Every OT preset trains with Adam (AdamW without weight decay) and **without gradient clipping**: Sinkformers'
training code, whose hyperparameters Kan et al. keep, does not clip (their released nanoGPT code, for the
text-generation experiments not reproduced here, clips at 1.0). The stand-ins keep a small weight decay
and a warm-up with cosine decay, as the library's other presets.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torch import nn

from ._builders import classes, images, registered, tokens
from ._registry import Preset, by_preset, register_preset, register_variants

__all__ = ["OT_VARIANTS", "OT_PRESETS"]


def _variants(
    baseline: dict[str, Any], continuous: dict[str, Any], steps: int, ot: float, node: float | None = None
) -> dict[str, dict[str, Any]]:
    """The discrete baseline, the OT-Transformer without and with its transport cost ``ot``, and (given the
    N-ODE Transformer's cost ``node``) the N-ODE Transformer without and with it; ``steps`` Euler steps on
    ``[0, 1]`` per ODE."""
    models = {
        "baseline": dict(baseline, field="discrete", steps=None, transport_cost=None),
        "ot_unregularized": dict(continuous, field="composed", steps=steps, transport_cost=None),
        "ot": dict(continuous, field="composed", steps=steps, transport_cost=ot),
    }
    if node is not None:
        models["node"] = dict(continuous, field="node", steps=steps, transport_cost=None)
        models["node_regularized"] = dict(continuous, field="node", steps=steps, transport_cost=node)
    return models


_MNIST = _variants(dict(dim=128), dict(dim=64), steps=20, ot=0.01)
_IMDB = _variants(dict(depth=6), dict(depth=3), steps=8, ot=0.5, node=0.5)
_IMDB_SLIGHT = {
    **_IMDB,
    "ot_slight": dict(_IMDB["ot"], transport_cost=0.01),
    "node_slight": dict(_IMDB["node"], transport_cost=0.01),
}
"""IMDb's variants and Table 4's † rows: the "unregularised" models trained with ``λ = 0.01``."""

OT_VARIANTS: dict[str, dict[str, dict[str, Any]]] = by_preset({
    "ot_mnist": _MNIST,
    "ot_catsdogs": _variants(dict(depth=6), dict(depth=5), steps=20, ot=0.01, node=0.005),
    "ot_imdb": _IMDB_SLIGHT,
    "ot_modelnet40": _variants(dict(dim=256), dict(dim=200), steps=8, ot=1.0, node=0.1),
    "ot_mnist_digits": _MNIST,
    "ot_imdb_tweets": _IMDB_SLIGHT,
    "ot_modelnet40_shapes3d": _variants(dict(dim=64), dict(dim=50), steps=8, ot=1.0, node=0.1),
})
"""The model overrides of the models Kan et al. (2025, Tables 1-4, Appendix B) compare, per OT preset.

``baseline`` is the discrete transformer (:class:`~neuralode_tf.models.DiscreteStack`); ``ot`` the
OT-Transformer (the blocks composed into one field on ``[0, 1]`` with their inner residuals, as the
released code; Euler; transport cost ``λ``; the preset's default); ``ot_unregularized`` the same with
``λ = 0``; ``node`` and ``node_regularized`` the N-ODE Transformer (eq. 12: one ODE per block, its
fully-connected layer without skip; the same steps per ODE) without and with its own ``λ``. Appendix B:

* MNIST: ``d = k`` 128 vs 64, 20 steps, ``λ = 0.01``. One attention-only block has no fully-connected
  layer, so the N-ODE Transformer *is* the OT-Transformer (the paper reports them as one; tested), and
  there are no ``node`` variants.
* Cats & Dogs: 6 vs 5 blocks, 20 steps, ``λ`` 0.01 (OT) and 0.005 (N-ODE).
* IMDb: 6 vs 3 blocks, 8 steps, ``λ = 0.5`` for both; ``ot_slight``/``node_slight`` are Table 4's
  "unregularised" rows (†), trained with ``λ = 0.01`` because ``λ = 0`` gave NaN (the stand-in
  ``ot_imdb_tweets`` has them too).
* ModelNet40: ISAB width 256 vs 200, 8 steps, ``λ`` 1 (OT) and 0.1 (N-ODE).

The stand-ins share the variants of their task, at their own sizes (``ot_modelnet40_shapes3d``: width 64 vs
50). Use them as ``--set model.<key>=<value>`` or with :func:`neuralode_tf.train.compare_variants`.
"""


def _ot_preset(name: str, description: str, dataset: str, model: Callable[..., nn.Module], **settings: Any) -> Preset:
    """The preset ``name``: ``model`` (a registered OT-Transformer, the ``ot`` variant) and no gradient clipping."""
    return register_preset(name, description, dataset, model, grad_clip=0.0, **settings)


_PAPER = dict(weight_decay=0.0, warmup_steps=0)
"""Adam, no warm-up: Sinkformers' optimiser (``weight_decay=0`` makes AdamW Adam)."""

OT_PRESETS: dict[str, Preset] = {
    "ot_mnist": _ot_preset(
        "ot_mnist",
        "Kan et al. MNIST ViT, Appendix B: d=k=64, 1 attention block, 20 Euler steps, λ=0.01, 45 epochs, batch "
        "100, lr 5e-4 (/10 after 35 and 40 epochs); needs data.root=<MNIST IDX folder>",
        "mnist",
        registered("ot_mnist_ode", images),
        epochs=45,
        batch_size=100,
        lr=5e-4,
        lr_decay_epochs=[35, 40],
        **_PAPER,
    ),
    "ot_catsdogs": _ot_preset(
        "ot_catsdogs",
        "Kan et al. Cats & Dogs ViT, Appendix B: 5 composed blocks, 20 steps, λ=0.01, 250 epochs, batch 64, "
        "lr 3e-5; needs data.root=<Kaggle train/>",
        "catsdogs",
        registered("ot_catsdogs_ode", images),
        epochs=250,
        batch_size=64,
        lr=3e-5,
        **_PAPER,
    ),
    "ot_imdb": _ot_preset(
        "ot_imdb",
        "Kan et al. IMDb classifier, Appendix B: 3 composed post-LN blocks, d=256, 8 steps, λ=0.5, 15 epochs, "
        "batch 64, lr 1e-4 (/10 after 12 epochs); needs data.root=<aclImdb>",
        "imdb",
        registered("ot_imdb_ode", tokens),
        epochs=15,
        batch_size=64,
        lr=1e-4,
        lr_decay_epochs=[12],
        data=dict(max_length=512, max_size=16_000),
        **_PAPER,
    ),
    "ot_modelnet40": _ot_preset(
        "ot_modelnet40",
        "Kan et al. ModelNet40 Set Transformer, Appendix B: ISAB width 200, 8 steps, λ=1, 5,000 points, 200 "
        "epochs, batch 64, lr 1e-3 (/10 after 150 epochs); needs data.root=<ModelNet40_cloud.h5>",
        "modelnet40_h5",
        registered("ot_modelnet40_ode", classes),
        epochs=200,
        batch_size=64,
        lr=1e-3,
        lr_decay_epochs=[150],
        data=dict(num_points=5000),
        **_PAPER,
    ),
    "ot_mnist_digits": _ot_preset(
        "ot_mnist_digits",
        "stand-in for ot_mnist: the MNIST ViT (d=k=64, 1 attention block, 20 Euler steps, λ=0.01) with patch 2 "
        "on scikit-learn digits",
        "digits",
        registered("ot_mnist_ode_digits", images),
        epochs=30,
        batch_size=64,
        lr=2e-3,
        weight_decay=0.05,
        warmup_steps=50,
    ),
    "ot_imdb_tweets": _ot_preset(
        "ot_imdb_tweets",
        "stand-in for ot_imdb: the post-LN classifier at d=64, 4 heads (3 composed blocks, 8 steps, λ=0.5) on "
        "12,000 tweets",
        "tweets",
        registered("ot_imdb_ode_tweets", tokens),
        epochs=2,
        batch_size=128,
        lr=1e-3,
        weight_decay=0.01,
        warmup_steps=50,
        data=dict(max_samples=12000),
    ),
    "ot_modelnet40_shapes3d": _ot_preset(
        "ot_modelnet40_shapes3d",
        "stand-in for ot_modelnet40: the Set Transformer at ISAB width 50, 2 heads, 8 PMA seeds (8 steps, λ=1) on "
        "2,000 shapes3d clouds",
        "shapes3d",
        registered("ot_modelnet40_ode_shapes3d", classes),
        epochs=10,
        batch_size=64,
        lr=2e-3,
        warmup_steps=50,
        data=dict(num_train=1600, num_test=400),
    ),
}
"""The OT presets by name (see the module docstring); :data:`~neuralode_tf.train.PRESETS` lists them too."""

register_variants(OT_VARIANTS)
