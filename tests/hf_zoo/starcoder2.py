from tests._hf_zoo import Specimen

ZOO = {
    "starcoder2": Specimen(
        "Starcoder2Config", "Starcoder2", dict(num_key_value_heads=2, sliding_window=4, use_bias=True), window=4
    ),
}
"""Grouped-query attention, a sliding window shorter than the sequence, biases on every projection."""
