"""``srl_tagger``: encoder-only BIO tagger for semantic role labelling (task ``srl``).

Per instance (one predicate of a sentence): input = word embedding + predicate-indicator
embedding (2 rows: other word / the predicate) + optionally an embedding of each word's signed
distance to the predicate, clipped to [-K, K] (``--srl-predicate-distance K``; 0 = none, the
default) + optionally a character CNN's vector of each word (``--srl-char-dim D``; 0 = none, the
default; ``CharacterCNN``, which gives words unseen in training, all <unk> to the word
embedding, a vector from their spelling) + fairseq's positional embedding (in training,
``--srl-word-dropout P`` first replaces each word but the predicate by <unk> with probability
P), then
fairseq's TransformerEncoder stack whose self-attention is chosen by ``--srl-encoder``, then a
classifier over the label dictionary: ``--srl-classifier linear`` (default) maps each word's
encoder state h_j to label logits; ``predicate-mlp`` scores the pair (h_j, h_p) of the word and
the predicate's state: W2 relu(W1 [h_j; h_p]) (hidden size = the embed dim, dropout between), so
that a label can depend on the word and the predicate jointly. Output: ``(logits (B, T, L), extra)`` with
``extra["selection_stats"]`` as in the translation models (empty for plain attention), so the
SSAN criterion code applies unchanged.

The encoder choices are the registry models.variants.ENCODER_VARIANTS: each variant's own
options (its options dataclass) are added to this model's, and its layer list and attention
builder make the encoder layers.

Options (``--srl-``) are declared once, in :class:`SRLTaggerOptions`; the model reads them as
that one typed object (``SRLTaggerOptions.from_args``). Its base, models.variants'
``EncoderModelOptions``, is the machinery of such a declaration for encoder-only models (shared
with ``pair_classifier``).
"""

from dataclasses import dataclass, field

import torch
import torch.nn as nn
import torch.nn.functional as F
from fairseq.dataclass import ChoiceEnum
from fairseq.models import FairseqEncoderModel, register_model, register_model_architecture
from fairseq.models.transformer import Embedding
from fairseq.models.transformer.transformer_legacy import base_architecture

from .variant_transformer import VariantTransformerEncoder
from .variants import (ENCODER_CHOICES, ENCODER_VARIANTS, EncoderModelOptions, encoder_field,
                       refuse_decoder_sites)
from ..errors import OptionError

CLASSIFIERS = ("linear", "predicate-mlp")


@dataclass
class SRLTaggerOptions(EncoderModelOptions):
    srl_encoder: ENCODER_CHOICES = encoder_field()
    srl_predicate_distance: int = field(default=0, metadata={
        "help": "add an embedding of each word's signed distance to the predicate, clipped to "
                "[-K, K]; 0 (default): none",
        "metavar": "K", "rule": (">= 0", lambda value: value >= 0)})
    srl_word_dropout: float = field(default=0.0, metadata={
        "help": "in training, replace each word other than the predicate by <unk> with "
                "probability P, so that <unk> (every word unseen in training) gets a trained "
                "embedding; 0 (default): never",
        "metavar": "P", "rule": ("in [0, 1)", lambda value: 0 <= value < 1)})
    srl_char_dim: int = field(default=0, metadata={
        "help": "add a character CNN of width D over each word's characters (max-pooled, "
                "projected to the embed dim), so that words unseen in training keep their "
                "spelling; needs a data directory with characters (ssan-prepare-srl); 0 "
                "(default): none",
        "metavar": "D", "rule": (">= 0", lambda value: value >= 0)})
    srl_classifier: ChoiceEnum(CLASSIFIERS) = field(default="linear", metadata={
        "help": "linear (default): labels from each word's encoder state; predicate-mlp: from "
                "the word's and the predicate's states through a one-hidden-layer MLP"})


def predicate_position(predicate):
    """(B, T) indicator, 1 at the predicate -> (B,) its position in the padded row."""
    return predicate.eq(1).long().argmax(dim=1)


class CharacterCNN(nn.Module):
    """A word vector from its characters: embedding (V, D), Conv1d(D -> D, width 3, zero
    padding), ReLU, max over the word's characters, Linear(D -> C).

    (B, T, L) character ids, right-padded with ``pad`` -> (B, T, C). The max over ReLU outputs
    with pad positions set to 0 equals the max over the real characters; a padding word (all
    pad) pools to 0. Each distinct spelling in the batch is encoded once (a batch holds every
    predicate's copy of a sentence, and frequent words many times) and the vectors are
    gathered back, which gives the same values and gradients at a fraction of the cost."""

    def __init__(self, num_chars: int, pad: int, dim: int, out_dim: int):
        super().__init__()
        self.pad = pad
        self.embed = nn.Embedding(num_chars, dim, padding_idx=pad)
        self.conv = nn.Conv1d(dim, dim, kernel_size=3, padding=1)
        self.proj = nn.Linear(dim, out_dim)

    def forward(self, chars):
        batch, words, width = chars.shape
        spellings, where = torch.unique(chars.reshape(batch * words, width), dim=0,
                                        return_inverse=True)  # (U, L), (B*T,)
        return self.encode(spellings)[where].view(batch, words, -1)

    def encode(self, spellings):
        """(U, L) character ids -> (U, C) word vectors."""
        h = F.relu(self.conv(self.embed(spellings).transpose(1, 2)))  # (U, D, L)
        h = h.masked_fill(spellings.eq(self.pad).unsqueeze(1), 0.0)
        return self.proj(h.max(dim=2).values)


class SRLEncoder(VariantTransformerEncoder):
    """VariantTransformerEncoder whose input adds a predicate-indicator embedding and, with
    ``--srl-predicate-distance`` K > 0, an embedding of the clipped signed distance to the
    predicate (2K + 1 rows: j - p = -K ... K)."""

    def __init__(self, args, dictionary, embed_tokens, variant_layers, build_attention):
        super().__init__(args, dictionary, embed_tokens, variant_layers, build_attention)
        self.options = SRLTaggerOptions.from_args(args)
        dim = embed_tokens.embedding_dim
        self.embed_predicate = nn.Embedding(2, dim)  # row 0: other words, row 1: the predicate
        nn.init.normal_(self.embed_predicate.weight, mean=0, std=dim**-0.5)
        self.max_distance = self.options.srl_predicate_distance
        self.word_dropout = float(self.options.srl_word_dropout)
        self.char_features = None  # CharacterCNN, set by enable_char_features
        self.embed_distance = None
        if self.max_distance > 0:
            self.embed_distance = nn.Embedding(2 * self.max_distance + 1, dim)
            nn.init.normal_(self.embed_distance.weight, mean=0, std=dim**-0.5)

    def enable_char_features(self, char_dict, dim: int) -> None:
        """Add a ``CharacterCNN`` of width ``dim`` over ``char_dict``'s characters to the input."""
        self.char_features = CharacterCNN(len(char_dict), char_dict.pad(), dim,
                                          self.embed_tokens.embedding_dim)

    def predicate_distance(self, predicate):
        """(B, T) long in [0, 2K]: clip(j - p, -K, K) + K, p the predicate's position in the
        padded row (either padding side)."""
        position = predicate_position(predicate).unsqueeze(1)  # (B, 1)
        offsets = torch.arange(predicate.size(1), device=predicate.device).unsqueeze(0) - position
        return offsets.clamp(-self.max_distance, self.max_distance) + self.max_distance

    def drop_words(self, src_tokens, predicate):
        """Training only: each word other than the predicate and padding becomes <unk> with
        probability ``--srl-word-dropout`` (so that <unk>, the embedding of every word unseen
        in training, is trained). Returns new tokens; the input is not modified."""
        if not self.training or self.word_dropout == 0:
            return src_tokens
        droppable = src_tokens.ne(self.dictionary.pad()) & predicate.ne(1)
        drop = droppable & (torch.rand(src_tokens.shape, device=src_tokens.device) < self.word_dropout)
        return src_tokens.masked_fill(drop, self.dictionary.unk())

    def forward(self, src_tokens, src_lengths=None, predicate=None, return_all_hiddens=False,
                chars=None):
        """src_tokens, predicate: (B, T); predicate is 1 at the predicate word, else 0;
        chars: (B, T, L) character ids (needed with character features, else ignored)."""
        if predicate is None:
            raise ValueError("SRLEncoder needs the predicate indicator (B x T)")
        if src_tokens.size(1) > self.max_source_positions:  # (the task keeps every sentence)
            raise OptionError(
                f"a sentence of {src_tokens.size(1)} words, longer than the encoder's "
                f"--max-source-positions {self.max_source_positions}; raise it")
        words = self.drop_words(src_tokens, predicate)
        token_embeddings = self.embed_tokens(words) + self.embed_predicate(predicate)
        if self.embed_distance is not None:
            token_embeddings = token_embeddings + self.embed_distance(self.predicate_distance(predicate))
        if self.char_features is not None:
            if chars is None or chars.shape[:2] != src_tokens.shape:
                raise OptionError("--srl-char-dim needs the (B, T, L) characters of the words: "
                                 "a data directory with S.chars (ssan-prepare-srl), got "
                                 f"{None if chars is None else tuple(chars.shape)} for words "
                                 f"{tuple(src_tokens.shape)}")
            token_embeddings = token_embeddings + self.char_features(chars)
        return super().forward(src_tokens, src_lengths, return_all_hiddens, token_embeddings)


class PredicateMLPClassifier(nn.Module):
    """Label logits from [h_j; h_p]: Linear(2C -> C), ReLU, dropout, Linear(C -> L)."""

    def __init__(self, dim, num_labels, dropout):
        super().__init__()
        self.hidden = nn.Linear(2 * dim, dim)
        self.dropout = nn.Dropout(dropout)
        self.out = nn.Linear(dim, num_labels)

    def forward(self, states, predicate):
        """states (B, T, C), predicate (B, T) 1 at the predicate -> logits (B, T, L)."""
        position = predicate_position(predicate)
        at_predicate = states[torch.arange(states.size(0), device=states.device), position]
        pairs = torch.cat([states, at_predicate.unsqueeze(1).expand_as(states)], dim=-1)
        return self.out(self.dropout(F.relu(self.hidden(pairs))))


@register_model("srl_tagger")
class SRLTaggerModel(FairseqEncoderModel):
    def __init__(self, encoder, classifier, options: SRLTaggerOptions):
        super().__init__(encoder)
        self.classifier = classifier
        self.options = options

    @staticmethod
    def add_args(parser):
        SRLTaggerOptions.add_args(parser)

    @classmethod
    def build_model(cls, args, task):
        options = SRLTaggerOptions.from_args(args)
        refuse_decoder_sites(args, "SRL tagger")
        words = task.source_dictionary
        embed_tokens = Embedding(len(words), args.encoder_embed_dim, words.pad())
        variant = ENCODER_VARIANTS[options.srl_encoder]
        if variant is None:
            encoder = SRLEncoder(args, words, embed_tokens, [], None)
        else:
            encoder = variant.build_variant_encoder(args, words, embed_tokens, SRLEncoder)
        if options.srl_char_dim > 0:
            if getattr(task, "char_dict", None) is None:
                raise OptionError("--srl-char-dim needs a data directory with characters "
                                 "(dict.chars.txt and S.chars): prepare it again with "
                                 "ssan-prepare-srl")
            encoder.enable_char_features(task.char_dict, options.srl_char_dim)
        labels = len(task.target_dictionary)
        if options.srl_classifier == "predicate-mlp":
            classifier = PredicateMLPClassifier(args.encoder_embed_dim, labels, args.dropout)
        else:
            classifier = nn.Linear(args.encoder_embed_dim, labels)
        return cls(encoder, classifier, options)

    def forward(self, src_tokens, src_lengths, predicate, chars=None, **kwargs):
        """-> (logits (B, T, L), {"selection_stats": [...], "encoder_padding_mask": [...]})."""
        out = self.encoder(src_tokens, src_lengths=src_lengths, predicate=predicate, chars=chars)
        x = out["encoder_out"][0].transpose(0, 1)  # T x B x C -> B x T x C
        if isinstance(self.classifier, PredicateMLPClassifier):
            logits = self.classifier(x, predicate)
        else:
            logits = self.classifier(x)
        return logits, {
            "selection_stats": out.get("selection_stats", []),
            "encoder_padding_mask": out["encoder_padding_mask"],
        }

    def get_normalized_probs(self, net_output, log_probs, sample=None):
        logits = net_output[0].float()
        return F.log_softmax(logits, dim=-1) if log_probs else F.softmax(logits, dim=-1)

    def get_targets(self, sample, net_output):
        return sample["target"]


@register_model_architecture("srl_tagger", "srl_tagger")
def srl_tagger(args):
    """4 layers, 256 dims, 4 heads, pre-norm, learned positions; the --srl- options' and every
    variant's defaults where args lack them (older checkpoints), the --srl- options checked."""
    SRLTaggerOptions.fill_defaults(args)
    for variant in ENCODER_VARIANTS.values():
        if variant is not None:
            variant.fill_defaults(args)
    args.encoder_embed_dim = getattr(args, "encoder_embed_dim", 256)
    args.encoder_ffn_embed_dim = getattr(args, "encoder_ffn_embed_dim", 1024)
    args.encoder_layers = getattr(args, "encoder_layers", 4)
    args.encoder_attention_heads = getattr(args, "encoder_attention_heads", 4)
    args.encoder_normalize_before = getattr(args, "encoder_normalize_before", True)
    args.encoder_learned_pos = getattr(args, "encoder_learned_pos", True)
    args.max_source_positions = getattr(args, "max_source_positions", 512)
    args.dropout = getattr(args, "dropout", 0.1)
    args.attention_dropout = getattr(args, "attention_dropout", 0.1)
    base_architecture(args)


@register_model_architecture("srl_tagger", "srl_tagger_small")
def srl_tagger_small(args):
    """The EWT recipe's size: 3 layers, 128 dims, FFN 512, 4 heads."""
    args.encoder_embed_dim = getattr(args, "encoder_embed_dim", 128)
    args.encoder_ffn_embed_dim = getattr(args, "encoder_ffn_embed_dim", 512)
    args.encoder_layers = getattr(args, "encoder_layers", 3)
    srl_tagger(args)
