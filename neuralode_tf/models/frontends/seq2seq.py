"""A small continuous-depth encoder-decoder transformer (Vaswani et al. 2017), with sequential (split) or parallel
layers (Zhong et al. 2022, eq. 4) or evolving attention (Wang et al. 2021)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from torch import Tensor, nn

from ...continuous import ContinuousDepth
from ...fields import EvolvingAttentionField, EvolvingAttentionStack
from ...nn import EvolvingAttentionBranch, MLPBranch
from ..readings.blocks import _evolving_settings, decoder_field, transformer_field
from ..readings.stack import _default_method, _named_field
from .decoding import EncoderDecoder
from .text import TokenEmbedding, _padding

__all__ = ["Seq2Seq", "ATTENTIONS"]

ATTENTIONS = ("encoder", "decoder", "encoder_decoder")
"""The three kinds of attention of an EA-Transformer (Wang et al. 2021, §4.3, Table 6), as keys of
:class:`Seq2Seq`'s ``evolving`` settings: encoder self-attention, decoder self-attention and encoder-decoder
attention."""


class Seq2Seq(EncoderDecoder):
    """Encoder-decoder transformer (Vaswani et al. 2017) with continuous-depth encoder and decoder.

    .. math::

        m = LN\\big(x(D_e)\\big),\\; \\frac{dx}{dt} = f_{enc}(t, x),\\; x(0) = \\mathrm{emb}(src); \\qquad
        \\mathrm{logits} = LN\\big(y(D_d)\\big)\\, W_{out}^\\top,\\; \\frac{dy}{dt} = f_{dec}(t, y; m),\\;
        y(0) = \\mathrm{emb}(tgt_{in})

    Embeddings are :class:`~neuralode_tf.models.frontends.text.TokenEmbedding` (scaled, with sinusoidal
    positions); ``W_out`` is the target embedding matrix when ``tie_output`` (Press & Wolf 2017;
    Vaswani et al. 2017, §3.4), else its own matrix; with ``share_embeddings`` source and target
    use one table (a shared vocabulary, as Vaswani et al. for WMT En-De). Id
    :data:`~neuralode_tf.models.frontends.text.PAD` (0) is padding and is never generated; ``bos`` and
    ``eos`` are chosen by the caller. Teacher forcing and decoding come from
    :class:`~neuralode_tf.models.EncoderDecoder`.

    The fields are pluggable: ``field`` takes a pair of any fields on ``[0, encoder_depth]``
    and ``[0, decoder_depth]``. :class:`~neuralode_tf.ContinuousDepth` calls ``bind`` on every
    submodule of a field that has one, with ``key_padding_mask`` (the encoder: source padding;
    the decoder: target padding), and for the decoder also ``memory`` ``(B, S, dim)`` and
    ``memory_key_padding_mask`` ``(B, S)``; a decoder field must be causal in the target positions
    for teacher forcing and decoding to agree.

    Args:
        src_vocab_size: Source token ids (``PAD`` included).
        tgt_vocab_size: Target token ids (default: ``src_vocab_size``).
        dim, num_heads: Width and attention heads of the default fields.
        encoder_depth, decoder_depth: Depth-time of the encoder and the decoder (blocks of the default fields).
        field: The name of a reading of the model's own blocks as continuous depth
            (:data:`~neuralode_tf.models.FIELDS`, :func:`~neuralode_tf.models.stack_encoder`), or a ready-made
            field module ``(t, x) -> dx/dt`` on ``[0, depth]`` (then leave out the arguments that configure the
            own blocks); here one name for both stacks, or a pair ``(encoder field, decoder field)`` of modules
            on ``[0, encoder_depth]`` and ``[0, decoder_depth]``. The names: ``"split"`` (default, vanilla
            attention: :func:`~neuralode_tf.models.transformer_field` and
            :func:`~neuralode_tf.models.decoder_field`, the sequential layers), ``"parallel"`` (Zhong et al.
            2022, eq. 4, Table 3: the same branches read as one sum, see below) or ``"evolving"``, the EA-Transformer
            of Wang et al.
            (2021, §4.3): evolving attention in the encoder self-attention, the decoder self-attention and the
            encoder-decoder attention, each with its own convolution (the same builders with ``evolving``
            settings), and skip connections in the encoder only.
        num_sets: Independent parameter sets of each field the model builds (weight sharing across depth).
        mlp_hidden: Hidden width of the MLPs of the fields the model builds (default ``4 * dim``).
        evolving: For ``field="evolving"``: settings of the
            :class:`~neuralode_tf.nn.EvolvingAttentionBranch` es (``alpha``, ``beta``, ``kernel_size``).
            The encoder's take them as given; the decoder's take ``α = 0``, no skip connection (eq. 4:
            ``A^i_input`` is the block's own logits; §4.1 defines "w/o skip" as ``α = 0``, and §4.3 uses
            skips "only in the encoder network as we find they harm the performance of a decoder"), and
            the rest as given, so their convolutions (``β``, ``kernel_size``) stay. Per kind of attention
            (:data:`ATTENTIONS`), a mapping under ``"encoder"`` (encoder self-attention), ``"decoder"``
            (decoder self-attention) or ``"encoder_decoder"`` (encoder-decoder attention) replaces settings
            there only, after the decoder's ``α = 0``: e.g. ``{"alpha": 0.1, "beta": 0.1, "encoder": {"beta":
            0.0}}`` is Table 6's "w/o Encoder Convolution" (Wang et al. 2021, §4.3). With ``β = 0`` an
            attention's convolution is still built but changes nothing: with ``α = 0`` too (the decoder's) the
            attention is vanilla attention.
        dropout: Dropout probability in ``[0, 1)`` of every :class:`~neuralode_tf.nn.AttentionBranch` (attention
            weights and output) and :class:`~neuralode_tf.nn.MLPBranch` (output) of both stacks, for ``"split"``
            and ``"parallel"``. It is drawn afresh at every field evaluation in training mode, so with the default
            unit steps it is the discrete model's dropout; Fairseq's ``--dropout`` (Zhong et al.'s Table 3) also
            drops the embeddings, which this does not.
        tie_output: Share the output projection with the target embedding.
        share_embeddings: One embedding table for source and target (needs equal vocabulary sizes).
        method, steps, step_size, **solve_options: Solve settings of both
            :class:`~neuralode_tf.ContinuousDepth` stacks. ``method=None`` goes by the kind of field, as
            :func:`~neuralode_tf.models.stack_encoder`: ``lie_trotter`` (split, evolving), ``euler`` (parallel),
            with one step per unit of time: the discrete pre-norm transformer, or its parallel layers.

    ``field="parallel"`` is Zhong et al.'s (2022, eq. 4) parallel layer in both stacks:

    .. math::

        \\frac{dx}{dt} = G(x) + F(x), \\qquad
        \\frac{dy}{dt} = \\mathrm{SA}(y) + \\mathrm{CA}(y; m) + F'(y)

    with the encoder's attention ``G`` and MLP ``F``, the decoder's causal self-attention ``SA``, encoder-decoder
    attention ``CA`` and MLP ``F'`` (:class:`~neuralode_tf.fields.ParallelField` s). One Euler step of size 1 per
    layer is ``x + G(x) + F(x)`` and ``y + SA(y) + CA(y; m) + F'(y)``, all branches reading the same state, where
    in the sequential layers (``"split"``, one Lie-Trotter step) each branch reads the state its predecessor
    updated. Same parameters and, from the same seed, the same weights; the decoder stays causal in the target
    positions. Zhong et al. compare the two in translation at dropout 0 and 0.1 (Table 3).

    The parameter count is ``sum(p.numel() for p in model.parameters())`` (a tied matrix counts once).
    """

    def __init__(
        self,
        src_vocab_size: int,
        tgt_vocab_size: int | None = None,
        dim: int = 64,
        num_heads: int = 4,
        encoder_depth: int = 2,
        decoder_depth: int = 2,
        *,
        field: str | tuple[nn.Module, nn.Module] = "split",
        num_sets: int | None = None,
        mlp_hidden: int | None = None,
        evolving: Mapping[str, Any] | None = None,
        dropout: float = 0.0,
        tie_output: bool = True,
        share_embeddings: bool = False,
        method: str | None = None,
        steps: int | None = None,
        step_size: float | None = None,
        **solve_options: Any,
    ):
        super().__init__()
        tgt_vocab_size = src_vocab_size if tgt_vocab_size is None else tgt_vocab_size
        if share_embeddings and tgt_vocab_size != src_vocab_size:
            raise ValueError(
                f"share_embeddings needs one vocabulary, got src_vocab_size={src_vocab_size}, "
                f"tgt_vocab_size={tgt_vocab_size}"
            )
        settings = _attention_settings(_evolving_settings(field, evolving))
        if isinstance(dropout, bool) or not (isinstance(dropout, (int, float)) and 0.0 <= dropout < 1.0):
            raise ValueError(f"dropout must be a probability in [0, 1), got {dropout!r}")
        if dropout and field == "evolving":
            raise ValueError("dropout= is for field='split' or 'parallel'; evolving attention takes none")

        def build(name: str) -> tuple[nn.Module, nn.Module]:
            own: dict[str, Any] = dict(num_sets=num_sets, mlp_hidden=mlp_hidden)
            if settings is None:
                encoder = transformer_field(dim, encoder_depth, num_heads, field=name, dropout=dropout, **own)
                return encoder, decoder_field(dim, num_heads, decoder_depth, field=name, dropout=dropout, **own)
            encoder = transformer_field(dim, encoder_depth, num_heads, field=name, evolving=settings["encoder"], **own)
            if settings["decoder"] == settings["encoder_decoder"]:
                decoder = decoder_field(dim, num_heads, decoder_depth, evolving=settings["decoder"], **own)
            else:
                decoder = _evolving_decoder(dim, num_heads, decoder_depth, settings, **own)
            return encoder, decoder

        block_settings = dict(num_sets=num_sets, mlp_hidden=mlp_hidden, dropout=dropout or None)
        fields = _named_field(field, build, valid=("split", "parallel", "evolving"), **block_settings)
        if fields is None:
            if not (isinstance(field, tuple) and len(field) == 2 and all(isinstance(f, nn.Module) for f in field)):
                raise TypeError(f"Seq2Seq's ready-made field is a pair (encoder field, decoder field), got {field!r}")
            fields = field
        encoder, decoder = fields
        solve_options.update(steps=steps, step_size=step_size)
        self.src_embed = TokenEmbedding(src_vocab_size, dim)
        self.tgt_embed = self.src_embed if share_embeddings else TokenEmbedding(tgt_vocab_size, dim)
        self.encoder = ContinuousDepth(
            encoder, t1=encoder_depth, method=method or _default_method(encoder), **solve_options
        )
        self.decoder = ContinuousDepth(
            decoder, t1=decoder_depth, method=method or _default_method(decoder), **solve_options
        )
        self.encoder_norm = nn.LayerNorm(dim)
        self.decoder_norm = nn.LayerNorm(dim)
        self.output = nn.Linear(dim, tgt_vocab_size, bias=False)
        self.tie_output = tie_output
        if tie_output:
            self.output.weight = self.tgt_embed.weight

    def _apply(self, fn: Any, recurse: bool = True) -> Seq2Seq:
        # A conversion that cannot happen in place (e.g. .to() an XLA device) gives each submodule its own
        # new Parameter, which would untie the output projection from the target embedding: re-tie it.
        super()._apply(fn, recurse)
        if self.tie_output:
            self.output.weight = self.tgt_embed.weight
        return self

    def encode(self, src: Tensor, src_key_padding_mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """The memory ``(B, S, dim)`` of ``src`` ``(B, S)`` and its padding mask (default ``src == PAD``)."""
        src_key_padding_mask = _padding(src, src_key_padding_mask, "src", "src_key_padding_mask")
        x = self.encoder(self.src_embed(src, src_key_padding_mask, name="src"), key_padding_mask=src_key_padding_mask)
        return self.encoder_norm(x), src_key_padding_mask

    def decode(
        self, tgt_in: Tensor, memory: Tensor, src_key_padding_mask: Tensor, tgt_key_padding_mask: Tensor | None = None
    ) -> Tensor:
        """Next-token logits ``(B, T, tgt_vocab)`` at every position of ``tgt_in`` ``(B, T)``, given the memory."""
        tgt_key_padding_mask = _padding(tgt_in, tgt_key_padding_mask, "tgt_in", "tgt_key_padding_mask")
        y = self.decoder(
            self.tgt_embed(tgt_in, tgt_key_padding_mask, name="tgt_in"),
            key_padding_mask=tgt_key_padding_mask,
            memory=memory,
            memory_key_padding_mask=src_key_padding_mask,
        )
        return self.output(self.decoder_norm(y))


def _attention_settings(evolving: dict[str, Any] | None) -> dict[str, dict[str, Any]] | None:
    """The :class:`~neuralode_tf.nn.EvolvingAttentionBranch` settings of each kind of attention
    (:data:`ATTENTIONS`): the shared ones, ``α = 0`` in the decoder (skips in the encoder only, Wang et al.
    2021, §4.3), then the kind's own mapping."""
    if evolving is None:
        return None
    shared = {key: value for key, value in evolving.items() if key not in ATTENTIONS}
    own = {name: evolving.get(name, {}) for name in ATTENTIONS}
    for name, given in own.items():
        if not isinstance(given, Mapping):
            raise TypeError(f"evolving[{name!r}] holds the settings of that attention (a mapping), got {given!r}")
        if any(key in ATTENTIONS for key in given):
            raise ValueError(f"evolving[{name!r}] holds settings, not another attention's: got {sorted(given)}")
    decoder = {**shared, "alpha": 0.0}
    return {
        "encoder": {**shared, **own["encoder"]},
        "decoder": {**decoder, **own["decoder"]},
        "encoder_decoder": {**decoder, **own["encoder_decoder"]},
    }


def _evolving_decoder(
    dim: int,
    num_heads: int,
    depth: int,
    settings: Mapping[str, Mapping[str, Any]],
    *,
    num_sets: int | None,
    mlp_hidden: int | None,
) -> EvolvingAttentionStack:
    """:func:`~neuralode_tf.models.decoder_field`'s evolving stack (built in the same order) with the decoder
    self-attention's and the encoder-decoder attention's own settings."""
    layers = [
        EvolvingAttentionField(
            EvolvingAttentionBranch(dim, num_heads, causal=True, **settings["decoder"]),
            EvolvingAttentionBranch(dim, num_heads, causal=True, cross_attention=True, **settings["encoder_decoder"]),
            MLPBranch(dim, mlp_hidden),
        )
        for _ in range(num_sets or depth)
    ]
    return EvolvingAttentionStack(layers, depth)
