from tests._hf_zoo import Specimen

_DISTILBERT_NAMES = {
    "hidden_size": "dim",
    "intermediate_size": "hidden_dim",
    "num_hidden_layers": "n_layers",
    "num_attention_heads": "n_heads",
}

# A projected embedding starts the tokens at a scale of about 0.2 with the common initializer_range 0.05, where the
# post-norm relaxations N(x) - x vary on that scale: RK4 reaches its order only from 32 steps per block there
# (tests/test_hf_encoders.py). The fitted orders start the tokens at unit scale, as every check of albert_inner does
# (its dopri5 adjoint gradients of 4 blocks, at the generic tolerances, need it too).
_UNIT_SCALE = dict(initializer_range=0.15)

ZOO = {
    "distilbert": Specimen("DistilBertConfig", "DistilBert", encoder=True, common=_DISTILBERT_NAMES),
    "electra": Specimen("ElectraConfig", "Electra", dict(embedding_size=16), encoder=True, smooth=_UNIT_SCALE),
    "albert": Specimen("AlbertConfig", "Albert", dict(embedding_size=16), encoder=True, smooth=_UNIT_SCALE),
    "albert_inner": Specimen(
        "AlbertConfig", "Albert", dict(embedding_size=16, inner_group_num=2, **_UNIT_SCALE), encoder=True
    ),
}
"""Post-LN encoders: DistilBERT (BERT's blocks, no segments, no pooler), ELECTRA with an embedding of width 16
projected to the hidden 32 (``embeddings_project``), ALBERT with its embedding of width 16 projected by
``embedding_hidden_mapping_in``, one layer shared by its 3 blocks, and with a group of 2 layers applied
in turn (6 blocks: 0, 1, 0, 1, 0, 1)."""
