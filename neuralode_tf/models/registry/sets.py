"""Set Transformers: Lee et al.'s ModelNet40 model and Kan et al.'s OT runs with their shapes3d stand-ins, registered on
import."""

from __future__ import annotations

from ..frontends.set_reference import ReferenceSetTransformer
from ..frontends.set_transformer import SetTransformer
from ._registry import register_model

# Set Transformers ---------------------------------------------------------------------------------------------

_LEE_MODELNET = dict(num_classes=40, num_heads=4, num_inducing=16, num_seeds=1, dropout=0.5)
_LEE_DOC = (
    "Lee et al.'s (2019) ModelNet40 Set Transformer as their code builds it (post-norm MABs), which Sinkformers and "
    "Kan et al. (2025, Appendix B) run: 2 ISABs, 4 heads, 16 inducing points, PMA with 1 seed, dropout 0.5."
)
_OT_SET = dict(dim=200, field="composed", steps=8, transport_cost=1.0)

register_model(
    "set_transformer_modelnet40", SetTransformer, "The ModelNet40 configuration of Lee et al. (2019; their "
    "main_pointcloud.py), with pre-norm ISABs: width 256, 4 heads, 16 inducing points, 2 ISABs, PMA with 1 seed, "
    "dropout 0.5, 40 classes.",
    num_classes=40, dim=256, num_heads=4, num_inducing=16, depth=2, num_seeds=1, dropout=0.5,
)
register_model(
    "set_transformer_shapes3d", SetTransformer, "A small Set Transformer for neuralode_tf.data.shapes3d (8 "
    "primitives): width 64, 4 heads, 16 inducing points, 2 ISABs, a 256-wide rFF and 8 PMA seeds (with one seed, "
    "cones/pyramids and boxes/cylinders were confused).",
    num_classes=8, dim=64, num_heads=4, num_inducing=16, depth=2, num_seeds=8, mlp_hidden=256,
)
register_model(
    "ot_modelnet40_baseline", ReferenceSetTransformer, f"{_LEE_DOC} Width 256, discrete: Kan et al.'s baseline "
    "(Table 1).",
    **_LEE_MODELNET, dim=256, field="discrete",
)
register_model(
    "ot_modelnet40_ode", ReferenceSetTransformer, f"{_LEE_DOC} The OT-Transformer: the points lifted to width 200, "
    "2 ISABs composed into one field on [0, 1], 8 Euler steps, λ = 1.",
    **_LEE_MODELNET, **_OT_SET,
)
register_model(
    "ot_modelnet40_ode_shapes3d", ReferenceSetTransformer, "ot_modelnet40_ode at width 50, 2 heads, 8 PMA seeds, no "
    "dropout, 8 classes (the ot_modelnet40_shapes3d stand-in, on shapes3d).",
    **{**_LEE_MODELNET, "num_classes": 8, "num_heads": 2, "num_seeds": 8, "dropout": 0.0}, **{**_OT_SET, "dim": 50},
)
