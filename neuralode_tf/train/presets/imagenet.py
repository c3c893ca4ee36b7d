"""ImageNet presets of Wang et al. (2021, §4.1, Tables 1-2): AA-ResNet and EA-AA-ResNet-34/50/101/152. Not here.

The paper's runs need ImageNet (``--set data.root=<folder of train/ and val/>``,
:func:`~neuralode_tf.data.load_imagenet`) and 8 GPUs; nothing of them runs on this machine, and the tests train
them only on a fake folder of a few tiny images with shrunk models. Their settings are §4.1's: "All models are
trained by 1.28 million training images for 100 epochs on 8 TESLA V100 GPUs ... optimizer is SGD with momentum
0.9, batch size is 32 per worker, weight decay is 1e-4. For the first 5 epochs, the learning rate is scaled
linearly from 0 to 0.128, and then it is divided by 10 at epoch 30, 60, 80 and 90":

* ``epochs=100``, ``batch_size=256``: the *global* batch, which the loop splits over the processes, so
  ``torchrun --nproc_per_node 8`` gives each GPU the paper's 32, each process's batch norms normalising over its
  32 images (the loop synchronises no batch norm) and DDP averaging the 8 gradients. One process takes all 256 at
  once (batch-norm statistics over 256); with ``--set grad_accumulation=8`` it computes the paper's step instead:
  the mean of the gradients of 8 micro-batches of 32, each normalised over its own 32 images;
* ``optimizer="sgd"``, ``momentum=0.9``, ``weight_decay=1e-4`` (added to the gradient), ``lr=0.128``,
  ``warmup_epochs=5``, ``lr_decay_epochs=[30, 60, 80, 90]`` (the loop's linear warm-up and step decays);
* ``grad_clip=0``: the paper mentions no clipping; ``checkpoint_every=5000``: about one epoch of ImageNet's 5,004 steps
  (1,281,167 images in batches of 256), so that a preempted run resumes from the last epoch or so.

The models are the registered ``aa_resnet{depth}`` and ``ea_aa_resnet{depth}`` (:func:`~neuralode_tf.models.aa_resnet`,
224 x 224 crops, 1,000 classes, Table 1's parameter counts 20.7M, 25.8M, 45.4M and 61.6M), built on the data's
crop size and classes and read by :func:`~neuralode_tf.models.continuous_resnet` with its default, one Lie-Trotter
Euler step per block: the discrete network (to rounding; a test), taking ``images=`` as the library's models do.
The evolving ones use ``α = 0.5, β = 1``: the paper gives only EA-AA-ResNet-34's and leaves the other depths' to an
appendix our copy lacks, so they take the same. ``neuralode-tf compare`` trains the models of
:data:`IMAGENET_VARIANTS`.
"""

from __future__ import annotations

from typing import Any

from ._builders import AA_RESNET_ABLATIONS, resnet
from ._registry import Preset, register_preset, register_variants

__all__ = ["IMAGENET_PRESETS", "IMAGENET_VARIANTS"]

_DEPTHS = {34: "20.7M", 50: "25.8M", 101: "45.4M", 152: "61.6M"}
"""ResNet depth -> the AA-ResNet's and EA-AA-ResNet's parameters (Wang et al. 2021, Table 1)."""

_PAPER: dict[str, Any] = dict(
    epochs=100,
    batch_size=256,
    optimizer="sgd",
    momentum=0.9,
    lr=0.128,
    weight_decay=1e-4,
    warmup_epochs=5,
    lr_decay_epochs=[30, 60, 80, 90],
    grad_clip=0.0,
    checkpoint_every=5000,
    data=dict(image_size=224),
)
"""Wang et al. (2021, §4.1)'s training settings (see the module docstring)."""


def _preset(depth: int, evolving: bool) -> Preset:
    model = f"{'ea_' if evolving else ''}aa_resnet{depth}"
    title = f"{'EA-' if evolving else ''}AA-ResNet-{depth} ({_DEPTHS[depth]}{', α=0.5, β=1' if evolving else ''})"
    description = (
        f"not here: ImageNet, 8 GPUs. Wang et al. 2021 §4.1 {title}: 100 epochs of 256 images (32 per GPU under "
        "torchrun x8), SGD momentum 0.9, lr 0 -> 0.128 in 5 epochs, /10 at 30, 60, 80, 90, weight decay 1e-4; "
        "needs data.root=<folder of train/ and val/>"
    )
    return register_preset(f"{model}_imagenet", description, "imagenet", resnet(model), **_PAPER)


IMAGENET_PRESETS: dict[str, Preset] = {
    f"{'ea_' if evolving else ''}aa_resnet{depth}_imagenet": _preset(depth, evolving)
    for depth in _DEPTHS
    for evolving in (False, True)
}
"""``aa_resnet{34,50,101,152}_imagenet`` and ``ea_aa_resnet{34,50,101,152}_imagenet`` (see the module docstring);
:data:`~neuralode_tf.train.PRESETS` lists them."""

IMAGENET_VARIANTS: dict[str, dict[str, dict[str, Any]]] = {
    f"ea_aa_resnet{depth}_imagenet": dict(AA_RESNET_ABLATIONS)
    if depth == 34
    else {name: AA_RESNET_ABLATIONS[name] for name in ("aa", "ea")}
    for depth in _DEPTHS
}
"""The models each EA-AA-ResNet preset compares, as model overrides (``neuralode-tf compare PRESET``): Table 1's
``aa`` (AA-ResNet) and ``ea`` (EA-AA-ResNet, ``α = 0.5, β = 1``, 3x3), and for ResNet-34 Table 2's ablations
``no_convolution`` (``β = 0``), ``no_skip`` (``α = 0``), ``kernel_1x1`` and ``kernel_5x5``."""

register_variants(IMAGENET_VARIANTS)
