"""The models a user trains: an embedding of the inputs, a continuous-depth stack
(:class:`~neuralode_tf.ContinuousDepth`) and a head. Their public names are exported by :mod:`neuralode_tf.models`.

Each ``forward`` takes its dataset kind's keyword (``images``, ``tokens``, ``points``, ...); the classifiers split as
timm's, ``forward = forward_head(forward_features(...))``; the encoder-decoders have ``encode`` and ``decode``.
Padding masks are True at padding, named as in :class:`torch.nn.Transformer` (``key_padding_mask``,
``src_key_padding_mask``, ``tgt_key_padding_mask``, ``memory_key_padding_mask``).
"""
