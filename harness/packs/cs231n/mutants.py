"""The CS231n pack's mutants: described bugs written as exact edits of the team's reference (reference.py), in the
mutant library's model (mutants/model.py: Edit, Mutant). Each is a bug that real forks of the course were found to
carry, with the cause the engine must name and the role probe that must fail on it."""
from __future__ import annotations

from mutants.model import Edit, Mutant

from .pack import ASSIGNMENT

REFERENCE = "harness/packs/cs231n/reference.py"
MASK_FILL = 'scores = scores.masked_fill(attn_mask == 0, float("-inf"))'


def _m(id, cause, edits, summary, explanation, course_sees):
    return Mutant(id=f"cs231n-{id}", cause=cause, assignment=ASSIGNMENT.name, reference=REFERENCE,
                  edits=tuple(Edit(o, n) for o, n in edits), summary=summary, explanation=explanation,
                  lesson=course_sees)


MUTANTS: tuple[Mutant, ...] = (
    _m("mask-discarded", "attention-mask-ignored",
       [(MASK_FILL, 'scores.masked_fill(attn_mask == 0, float("-inf"))')],
       "masked_fill called out of place and its result dropped",
       "masked_fill returns a new tensor; called on a line of its own its result is lost and the scores go to the "
       "softmax unmasked, so every query attends to every key whatever attn_mask says.",
       "the course's masked-attention check: a relative error, no line"),
    _m("mask-inverted", "attention-mask-inverted",
       [(MASK_FILL, 'scores = scores.masked_fill(attn_mask == 1, float("-inf"))')],
       "the mask blocks where it should attend",
       "attn_mask's 1 entries mean 'may attend'; filling where the mask is 1 blocks exactly those keys and keeps "
       "the ones the mask forbids.",
       "the course's masked-attention check: a relative error, no line"),
    _m("mask-plus-inf", "attention-mask-nan",
       [(MASK_FILL, 'scores = scores.masked_fill(attn_mask == 0, float("inf"))')],
       "blocked scores filled with +inf",
       "A blocked score must become -inf (its weight 0); +inf makes exp overflow and the softmax row NaN.",
       "the course's masked-attention check: NaN"),
    _m("value-from-key", "value-from-key",
       [("v = self.value(value)", "v = self.value(key)")],
       "the value projection applied to the key input",
       "Values are read from the value input; projecting the key input instead is invisible when key is value "
       "(self-attention, the course's checks) and wrong whenever they differ.",
       "invisible to the course's checks (they pass key == value)"),
    _m("scale-missing", "attention-scale-missing",
       [("scores = q @ k.transpose(-2, -1) / math.sqrt(hd)", "scores = q @ k.transpose(-2, -1)")],
       "scores not divided by sqrt(head_dim)",
       "q.k grows like sqrt(head_dim); unscaled, the softmax saturates and its gradients vanish.",
       "the course's attention check: a relative error"),
    _m("heads-merged-wrong", "heads-merged-wrong",
       [("merged = heads.transpose(1, 2).reshape(n, s, e)", "merged = heads.reshape(n, s, e)")],
       "heads merged by a reshape without moving the head axis back",
       "(N, H, S, hd) reshaped straight to (N, S, E) interleaves the heads' rows: each output row mixes "
       "positions.",
       "the course's attention check: a relative error"),
    _m("dropout-in-eval", "attention-dropout-in-eval",
       [("weights = self.attn_drop(weights)", "weights = torch.dropout(weights, self.attn_drop.p, True)")],
       "functional dropout told it always trains",
       "Dropout called as a function with train=True keeps dropping in eval mode: the output is random at "
       "inference.",
       "invisible to checks run in train mode"),
    _m("dropout-on-output", "attention-dropout-misplaced",
       [("        weights = self.attn_drop(weights)\n", ""),
        ("return self.proj(merged)", "return self.proj(self.attn_drop(merged))")],
       "dropout on the attention output instead of the attention weights",
       "The course drops attention weights (which keys a query reads); dropping the merged output instead is "
       "another regulariser, and the course's train-mode values no longer match.",
       "the course's train-mode check: a relative error"),
    _m("pe-not-added", "positional-not-added",
       [("return self.dropout(out)", "return self.dropout(x)")],
       "the encoding computed but never added",
       "forward builds x + table and returns x: the model receives no position information at all.",
       "invisible when the check compares shapes or runs only the captioning model"),
    _m("pe-in-place", "positional-in-place",
       [("out = x + self.pe[:, :s, :d]", "x += self.pe[:, :s, :d]\n        out = x")],
       "the encoding added into the caller's tensor",
       "x += table writes into the caller's tensor: the embedding the caller keeps now holds the encoding too.",
       "invisible to the course's checks"),
    _m("pe-cos-exponent", "positional-table-wrong",
       [("table[0, :, 1::2] = torch.cos(position * rate)",
         "table[0, :, 1::2] = torch.cos(position * torch.pow(10000.0, -torch.arange(1, embed_dim, 2) / embed_dim))")],
       "the cosine columns use their own index in the exponent",
       "Column 2k+1 must share column 2k's frequency 10000^(-2k/D); with its own index 2k+1 every cosine column "
       "drifts, by little for small D (the course's D=6 check passes from j = 3 on).",
       "invisible to the course's small check"),
    _m("pe-dtype-cast", "positional-dtype-cast",
       [("out = x + self.pe[:, :s, :d]", "out = torch.empty((n, s, d))\n        out[:] = x + self.pe[:, :s, :d]")],
       "x + table written into a float32 tensor of its own",
       "A float64 input comes back float32: the caller's dtype is lost and the next float64 layer fails.",
       "the course's float64 captioning check: a dtype error in the next layer"),
    _m("pe-dropout-discarded", "positional-dropout-lost",
       [("return self.dropout(out)", "self.dropout(out)\n        return out")],
       "the dropout's result dropped",
       "self.dropout(out) on a line of its own returns a new tensor that nobody keeps: no dropout in training.",
       "the course's train-mode check: a relative error"),
    _m("causal-upper", "causal-mask-wrong",
       [("tgt_mask = torch.tril(", "tgt_mask = torch.triu(")],
       "the captioning mask is upper-triangular",
       "The decoder's mask must let position i see positions <= i (the lower triangle); the upper one shows each "
       "position the future and hides the past.",
       "invisible to the course's 2022-2024 captioning check"),
    _m("causal-flipped", "causal-mask-wrong",
       [("tgt_mask = torch.tril(torch.ones(t, t, device=captions.device, dtype=torch.bool))",
         "tgt_mask = torch.tril(torch.ones(t, t, device=captions.device, dtype=torch.bool)).flip(-1)")],
       "the captioning mask is the lower triangle flipped left-right",
       "Flipping the triangle gives an anti-triangular mask: positions see future tokens and lose past ones.",
       "invisible to the course's 2022-2024 captioning check"),
)

CAUSAL_MASK = "tgt_mask = torch.tril(torch.ones(t, t, device=captions.device, dtype=torch.bool))"
ENCODER_SELF = "        a = self.self_attn(query=src, key=src, value=src, attn_mask=src_mask)\n" \
    "        src = self.norm_self(src + self.dropout_self(a))"

MUTANTS += (
    _m("mask-batched", "mask-batch-axes",
       [(MASK_FILL, 'scores = scores.masked_fill(attn_mask[None, None] == 0, float("-inf"))'),
        (CAUSAL_MASK, CAUSAL_MASK + "[None]")],
       "a (1, T, T) causal mask into an attention that adds two axes whatever the mask's rank",
       "The model's mask gets a leading axis and the attention unsqueezes two more: masked_fill broadcasts the "
       "(N, H, T, T) scores to five axes, and merging the heads back mixes the examples and the heads.",
       "invisible to the course's 2022-2024 captioning check"),
    _m("pe-added-twice", "positional-added-twice",
       [("words = self.positional_encoding(self.embedding(captions))",
         "words = self.embedding(captions)\n        words = words + self.positional_encoding(words)")],
       "the embedding added onto the positional encoding's output again",
       "PositionalEncoding.forward already returns x + table; adding x again gives the decoder 2 x embedding + "
       "table.",
       "invisible to the course's 2022-2024 captioning check (one linspace for every weight)"),
    _m("layer-mask-default", "layer-fails-without-mask",
       [("def forward(self, src, src_mask=None):\n        a = ",
         "def forward(self, src, src_mask=torch.Tensor | None):\n        a = ")],
       "the encoder layer's mask default is a type, not None",
       "Called without a mask, src_mask is the type expression itself: the attention's masked_fill raises.",
       "invisible to the course's checks (the vision transformer passes the mask explicitly)"),
    _m("layer-mask-not-passed", "layer-mask-not-passed",
       [("a = self.self_attn(query=tgt, key=tgt, value=tgt, attn_mask=tgt_mask)",
         "a = self.self_attn(query=tgt, key=tgt, value=tgt)")],
       "the decoder layer calls its self-attention without the mask",
       "tgt_mask is taken and never handed on: every position attends to the later ones.",
       "the course's decoder-layer check: a relative error, no line"),
    _m("layer-pre-norm", "layer-sublayer-order",
       [(ENCODER_SELF, "        h = self.norm_self(src)\n"
                       "        a = self.self_attn(query=h, key=h, value=h, attn_mask=src_mask)\n"
                       "        src = src + self.dropout_self(a)")],
       "the encoder layer normalises before its self-attention (pre-norm)",
       "The assignment's layer is post-norm, norm(x + sublayer(x)); normalising first computes another function "
       "with the same weights.",
       "the course's encoder-layer check: a relative error"),
    _m("layer-dropout-in-eval", "layer-dropout-wrong",
       [("return self.norm_ffn(src + self.dropout_ffn(self.ffn(src)))",
         "return self.norm_ffn(src + torch.dropout(self.ffn(src), self.dropout_ffn.p, True))")],
       "the encoder layer's feed-forward dropout told it always trains",
       "torch.dropout(x, p, True) drops in eval mode too: the layer's output is random at inference.",
       "invisible to checks run in train mode"),
    _m("constructor-order", "constructor-signature",
       [("def __init__(self, word_to_idx, input_dim, wordvec_dim, num_heads=4, num_layers=2, max_length=50):",
         "def __init__(self, input_dim, wordvec_dim, num_heads, num_layers, word_to_idx, max_length=50):")],
       "the captioning model's constructor takes word_to_idx fifth",
       "The course builds CaptioningTransformer(word_to_idx, input_dim=..., ...): with word_to_idx moved, the "
       "dictionary lands in input_dim and input_dim is given twice.",
       "the course's captioning checks: a TypeError before anything runs"),
)

FFN_RETURN = "return self.fc2(self.dropout(self.gelu(self.fc1(x))))"
PATCH_GRID = "grid = x.reshape(n, c, hh // p, p, ww // p, p).permute(0, 2, 4, 1, 3, 5)"

MUTANTS += (
    _m("ffn-no-activation", "feed-forward-linear",
       [(FFN_RETURN, "return self.fc2(self.dropout(self.fc1(x)))")],
       "the feed-forward network's GELU left out",
       "fc2(fc1(x)) with nothing between the two linear maps is one linear map: the network adds nothing the "
       "attention's projections cannot do.",
       "the course's feed-forward check: a relative error, no line"),
    _m("ffn-dropout-in-eval", "feed-forward-dropout-wrong",
       [(FFN_RETURN, "return self.fc2(torch.dropout(self.gelu(self.fc1(x)), self.dropout.p, True))")],
       "the feed-forward network's dropout told it always trains",
       "torch.dropout(x, p, True) drops in eval mode too: every layer built on the network is random at inference.",
       "invisible to checks run in train mode"),
    _m("patch-no-permute", "patch-layout-wrong",
       [(PATCH_GRID, "grid = x.reshape(n, -1, self.patch_dim)")],
       "the image reshaped into tokens without moving the channel axis",
       "(N, C, H, W) reshaped straight to (N, patches, C*p*p) cuts each channel's rows into runs: a token holds "
       "pieces of several image rows of one channel, not a p x p patch.",
       "the course's patch-embedding check: a relative error, no line"),
    _m("patch-columns-first", "patch-layout-wrong",
       [(PATCH_GRID, "grid = x.reshape(n, c, hh // p, p, ww // p, p).permute(0, 4, 2, 1, 3, 5)")],
       "the patch grid's axes swapped: patches numbered column by column",
       "Patch k must be grid row k // (W/p), column k % (W/p); putting the column axis first numbers the patches "
       "down the columns, and the positional encoding of each token belongs to another patch.",
       "the course's patch-embedding check: a relative error, no line"),
    _m("vit-causal-mask", "encoder-attention-masked",
       [("pooled = self.transformer(tokens).mean(dim=1)",
         "pooled = self.transformer(tokens, src_mask=torch.tril(torch.ones(tokens.shape[1], tokens.shape[1])))"
         ".mean(dim=1)")],
       "the vision transformer's encoder given the captioning decoder's causal mask",
       "An image's patches have no order to respect: a causal mask lets patch k attend only to the patches before "
       "it, so the first tokens never see most of the image.",
       "the course's vision-transformer check: a relative error, no line"),
)

# the role probe each mutant must fail (component, probe id, mechanism kind)
EXPECTED = {
    "cs231n-mask-discarded": ("MultiHeadAttention", "mask-float", "ignored"),
    "cs231n-mask-inverted": ("MultiHeadAttention", "mask-float", "inverted"),
    "cs231n-mask-plus-inf": ("MultiHeadAttention", "mask-float", "nan"),
    "cs231n-value-from-key": ("MultiHeadAttention", "inputs", "value-from-key"),
    "cs231n-scale-missing": ("MultiHeadAttention", "scale", "unscaled"),
    "cs231n-heads-merged-wrong": ("MultiHeadAttention", "reference", "heads-merged-wrong"),
    "cs231n-dropout-in-eval": ("MultiHeadAttention", "eval-determinism", "dropout-in-eval"),
    "cs231n-dropout-on-output": ("MultiHeadAttention", "dropout", "on-output"),
    "cs231n-pe-not-added": ("PositionalEncoding", "added", "not-added"),
    "cs231n-pe-in-place": ("PositionalEncoding", "in-place", "in-place"),
    "cs231n-pe-cos-exponent": ("PositionalEncoding", "formula", "odd-exponent"),
    "cs231n-pe-dtype-cast": ("PositionalEncoding", "dtype", "cast"),
    "cs231n-pe-dropout-discarded": ("PositionalEncoding", "dropout", "dropout-discarded"),
    "cs231n-causal-upper": ("CaptioningTransformer", "causal", "upper"),
    "cs231n-causal-flipped": ("CaptioningTransformer", "causal", "flipped"),
    "cs231n-mask-batched": ("CaptioningTransformer", "causal", "batched-mask"),
    "cs231n-pe-added-twice": ("CaptioningTransformer", "added-once", "added-twice"),
    "cs231n-layer-mask-default": ("TransformerEncoderLayer", "call", "mask-default"),
    "cs231n-layer-mask-not-passed": ("TransformerDecoderLayer", "mask", "not-passed"),
    "cs231n-layer-pre-norm": ("TransformerEncoderLayer", "reference", "order"),
    "cs231n-layer-dropout-in-eval": ("TransformerEncoderLayer", "dropout", "dropout-in-eval"),
    "cs231n-constructor-order": ("CaptioningTransformer", "loss-at-init", "parameter-order"),
    "cs231n-ffn-no-activation": ("FeedForwardNetwork", "nonlinear", "affine"),
    "cs231n-ffn-dropout-in-eval": ("FeedForwardNetwork", "dropout", "dropout-in-eval"),
    "cs231n-patch-no-permute": ("PatchEmbedding", "layout", "no-permute"),
    "cs231n-patch-columns-first": ("PatchEmbedding", "layout", "column-order"),
    "cs231n-vit-causal-mask": ("VisionTransformer", "attends-all", "masked"),
}
# the other components whose checks a mutant's cause reads with the expected one's (the attention's robustness
# note confirms the model's batched mask); a mutant that cannot be built fails its checks as errors
ALSO = {"cs231n-mask-batched": ("MultiHeadAttention",)}
ERRORS = ("cs231n-constructor-order",)
