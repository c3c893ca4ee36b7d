"""Readings of a stack of transformer blocks as an ODE, by name: :data:`~neuralode_tf.models.FIELDS` (in
:mod:`.stack`) maps each name a model's ``field=`` takes to what builds it, beside the blocks (:mod:`.blocks`,
:mod:`.set_blocks`) and the readings defined here (:mod:`.node`: the N-ODE Transformer; :mod:`.discrete`: the
discrete stack itself). The fields they build are those of :mod:`neuralode_tf.fields`.
"""
