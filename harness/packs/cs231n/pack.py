"""CS231n assignment 3's transformer part, declared through the pack API (harness/packs/api.py) only.

What the course asks (its public assignment description; the signatures below are the course's contract, the
code behind them is ours, reference.py): `cs231n/transformer_layers.py` holds PositionalEncoding and
MultiHeadAttention (`forward(query, key, value, attn_mask=None)`, attn_mask of shape (S, T) whose 0 entries block
attention; the course passes 0/1 numbers, and a bool mask works the same way), from 2025 also FeedForwardNetwork,
TransformerDecoderLayer, PatchEmbedding and TransformerEncoderLayer; `cs231n/classifiers/transformer.py` holds
CaptioningTransformer (the student's forward and sample from 2022 on) and from 2025 VisionTransformer.

Editions: "2021" (the student writes the two layers; the captioning model is given), "2022" (the 2022-2024
editions: the captioning model's forward and sample too), "2025" and "2026" (the decoder and encoder layers,
the patch embedding and the vision transformer too). Torch-free data.
"""
from __future__ import annotations

from ..api import NO_COURSE_CHECK, Assignment, Binding, CourseCall, Edition, Mask, Pack

LAYERS = "cs231n/transformer_layers.py"
MODELS = "cs231n/classifiers/transformer.py"
L = "cs231n.transformer_layers"
M = "cs231n.classifiers.transformer"

# the sizes the course's notebook uses for its checks (N batch, S query length, T key length, E width, H heads)
ATTENTION_SHAPES = {"N": 2, "S": 4, "T": 6, "E": 8, "H": 2}
POSITIONAL_SHAPES = {"N": 1, "S": 3, "D": 6}
CAPTION_SHAPES = {"N": 3, "T": 6, "D": 16, "W": 16, "H": 2, "V": 11, "layers": 2}
ZERO_BLOCKS = Mask(blocks="zero", dtype="any", shape="TxS")     # (query, key); 0 / False: do not attend

# How the course's notebook checks each piece (its public description: it builds the piece from a fixed seed, calls
# it on small random data and prints the relative error against expected values printed to four decimals, asking for
# errors "on the order of e-3 or less", so an error under 1e-2 reads as passing; the values below are ours). The
# attention check calls self-attention with and without a random mask and attention over other data, the key and
# value being that same data; the layers are left in training mode (their dropout runs under the seed); the
# 2022-2024 captioning check sets every parameter to one evenly spaced range of float64 numbers (and so cannot see
# how the decoder masks, and sees a piece that casts to float32). A bug on a piece whose calls all pass here is one
# those checks miss.
COURSE_BAR = 1e-2
POSITIONAL_COURSE = (CourseCall("the notebook's PositionalEncoding check", shapes={"N": 1, "S": 3, "D": 6},
                                init={"embed_dim": 6}, mode="train", rtol=COURSE_BAR),)
ATTENTION_COURSE = (
    CourseCall("the notebook's self-attention check", shapes={"N": 1, "S": 3, "T": 3, "E": 8},
               init={"embed_dim": 8, "num_heads": 2}, same=("query", "key", "value"), mode="train", rtol=COURSE_BAR),
    CourseCall("the notebook's masked self-attention check", shapes={"N": 1, "S": 3, "T": 3, "E": 8},
               init={"embed_dim": 8, "num_heads": 2}, same=("query", "key", "value"), mask="random", mode="train",
               rtol=COURSE_BAR),
    CourseCall("the notebook's attention check (other data as key and value)", shapes={"N": 1, "S": 3, "T": 2,
               "E": 8}, init={"embed_dim": 8, "num_heads": 2}, same=("key", "value"), mode="train", rtol=COURSE_BAR),
)
CAPTIONING_COURSE = (CourseCall("the notebook's CaptioningTransformer check (every weight one evenly spaced range)",
                                shapes={"N": 3, "T": 3, "D": 20, "V": 4}, init={"input_dim": 20, "wordvec_dim": 30},
                                weights="linspace", span=(-1.2, 1.1), dtype="float64", mode="eval",
                                rtol=COURSE_BAR),)

# The 2025 edition's notebook (the 2026 one is checked as 2025: its files are not told apart) checks the late pieces
# so, each after a fixed seed, against its own printed values, asking for a relative error under the bar it names:
# the decoder and encoder layers built with the width and heads given positionally and a feed-forward width of four
# times the width, called on one short sequence with a random boolean mask (the decoder over a slightly longer
# memory), the patch embedding on two small images in patches of half their side, the vision transformer with every
# constructor default on three images of the default side; nothing is switched to eval in 2025 (2026 switches the
# layers and the vision transformer to eval), so their dropout runs under the seed. The feed-forward network has no
# check of its own (only through the layers and the vision transformer that use it). The notebook's bars are 1e-4
# (patch embedding) and 1e-6 (the rest) against its own solution's float32 rounding; the replay compares with our
# reference, which rounds otherwise: up to 2e-6 measured on 18 correct 2025 forks (the vision transformer), while
# the bugs measured give 0.68 to 1. So every late call's bar is the notebook's loosest, 1e-4.
LATE_BAR = 1e-4
DECODER_COURSE = (CourseCall("the notebook's TransformerDecoderLayer check", shapes={"N": 1, "T": 4, "S": 5, "E": 12},
                             init={"input_dim": 12, "num_heads": 2, "dim_feedforward": 48, "dropout": None},
                             mask="random", mode="train", rtol=LATE_BAR),)
ENCODER_COURSE = (CourseCall("the notebook's TransformerEncoderLayer check", shapes={"N": 1, "T": 4, "E": 12},
                             init={"input_dim": 12, "num_heads": 2, "dim_feedforward": 48, "dropout": None},
                             mask="random", mode="train", rtol=LATE_BAR),)
PATCH_COURSE = (CourseCall("the notebook's PatchEmbedding check", shapes={"N": 2, "C": 3, "image": 16},
                           init={"img_size": 16, "patch_size": 8, "in_channels": None, "embed_dim": 8}, mode="train",
                           rtol=LATE_BAR),)
VIT_COURSE = (CourseCall("the notebook's VisionTransformer check (every constructor default)",
                         shapes={"N": 3, "C": 3, "image": 32}, init={k: None for k in (
                             "img_size", "patch_size", "in_channels", "embed_dim", "num_layers", "num_heads",
                             "dim_feedforward", "num_classes", "dropout")}, mode="train", rtol=LATE_BAR),)

EARLY = ("2021", "2022")
LATE = ("2025", "2026")
CAPTIONING = ("2022", "2025", "2026")

COMPONENTS = ("PositionalEncoding", "MultiHeadAttention", "CaptioningTransformer", "FeedForwardNetwork",
              "TransformerDecoderLayer", "PatchEmbedding", "TransformerEncoderLayer", "VisionTransformer")
# the student's pieces the bindings below measure (the feed-forward network, the patch embedding and the vision
# transformer through the feed-forward, patch-embedding and classifier roles)
BOUND_LATE = ("PositionalEncoding", "MultiHeadAttention", "CaptioningTransformer", "CaptioningTransformer.sample",
              "FeedForwardNetwork", "TransformerDecoderLayer", "PatchEmbedding", "TransformerEncoderLayer",
              "VisionTransformer")
# a small image: 16 x 16 pixels in 4 x 4 patches (16 tokens), as the role probes perturb it pixel by pixel
PATCH_INIT = {"img_size": 16, "patch_size": 4, "in_channels": 3, "embed_dim": 8}
PATCH_SHAPES = {"N": 2, "C": 3, "image": 16, "patch": 4, "E": 8}
VIT_INIT = {"img_size": 16, "patch_size": 4, "in_channels": 3, "embed_dim": 16, "num_layers": 2, "num_heads": 2,
            "dim_feedforward": 32, "num_classes": 5, "dropout": 0.1}
VIT_SHAPES = {"N": 2, "C": 3, "image": 16, "patch": 4, "classes": 5}

ASSIGNMENT = Assignment(
    name="cs231n",
    title="Stanford CS231n assignment 3: multi-head attention, positional encoding and a captioning transformer.",
    handed_in="the assignment folder holding cs231n/ (or its transformer_layers.py and classifiers/transformer.py)",
    required=("PositionalEncoding", "MultiHeadAttention"),
    optional=COMPONENTS[2:],
    packages=("numpy",),
    per_component=True,
)

PACK = Pack(
    assignment=ASSIGNMENT,
    files=(LAYERS, MODELS),
    editions=(
        # told apart by what the starter's files declare: the 2025 edition moved the decoder layer into the layers
        # file and added the encoder side (the 2026 starter declares the same classes and is not told apart by its
        # files: it is checked as 2025, whose contract it shares); 2022-2024 document attn_mask as (S, T), 2021 as
        # (T, S) (the same (query, key) layout)
        Edition("2025", markers={LAYERS: "class PatchEmbedding"}, student=BOUND_LATE),
        Edition("2026", markers={LAYERS: "class PatchEmbedding"}, student=BOUND_LATE),
        Edition("2022", markers={LAYERS: "attn_mask: Array of shape (S, T)"},
                student=("PositionalEncoding", "MultiHeadAttention", "CaptioningTransformer",
                         "CaptioningTransformer.sample")),
        Edition("2021", markers={LAYERS: "attn_mask: Array of shape (T, S)"},
                student=("PositionalEncoding", "MultiHeadAttention")),
    ),
    reference="harness.packs.cs231n.reference",
    bindings=(
        Binding(role="positional", component="PositionalEncoding", target=f"{L}:PositionalEncoding",
                init={"embed_dim": 6, "dropout": 0.1, "max_len": 12}, call=("x",), shapes=POSITIONAL_SHAPES,
                formula="sin-even-cos-odd", points=20.0, course=POSITIONAL_COURSE),
        Binding(role="attention", component="MultiHeadAttention", target=f"{L}:MultiHeadAttention",
                init={"embed_dim": 8, "num_heads": 2, "dropout": 0.1}, call=("query", "key", "value", "mask"),
                shapes=ATTENTION_SHAPES, mask=ZERO_BLOCKS, points=40.0, course=ATTENTION_COURSE),
        Binding(role="model", component="CaptioningTransformer", target=f"{M}:CaptioningTransformer",
                init={"input_dim": 16, "wordvec_dim": 16, "num_heads": 2, "num_layers": 2, "max_length": 30},
                call=("features", "captions"), shapes=CAPTION_SHAPES, mask=ZERO_BLOCKS, editions=CAPTIONING,
                points=40.0, course=CAPTIONING_COURSE),
        Binding(role="sampler", component="CaptioningTransformer.sample", target=f"{M}:CaptioningTransformer.sample",
                init={"input_dim": 16, "wordvec_dim": 16, "num_heads": 2, "num_layers": 2, "max_length": 30},
                call=("features",), shapes=CAPTION_SHAPES, editions=CAPTIONING),
        Binding(role="feed-forward", component="FeedForwardNetwork", target=f"{L}:FeedForwardNetwork",
                init={"embed_dim": 8, "ffn_dim": 16, "dropout": 0.1}, call=("x",), shapes={"N": 2, "T": 5, "E": 8},
                editions=LATE, points=5.0, course=NO_COURSE_CHECK),
        Binding(role="layer", component="TransformerDecoderLayer", target=f"{L}:TransformerDecoderLayer",
                init={"input_dim": 8, "num_heads": 2, "dim_feedforward": 16, "dropout": 0.1},
                call=("x", "memory", "mask"), shapes={"N": 2, "T": 5, "S": 3, "E": 8}, mask=ZERO_BLOCKS,
                editions=LATE, points=10.0, course=DECODER_COURSE),
        Binding(role="layer", component="TransformerEncoderLayer", target=f"{L}:TransformerEncoderLayer",
                init={"input_dim": 8, "num_heads": 2, "dim_feedforward": 16, "dropout": 0.1},
                call=("x", "mask"), shapes={"N": 2, "T": 5, "E": 8}, mask=ZERO_BLOCKS, editions=LATE,
                points=10.0, course=ENCODER_COURSE),
        Binding(role="patch-embedding", component="PatchEmbedding", target=f"{L}:PatchEmbedding", init=PATCH_INIT,
                call=("x",), shapes=PATCH_SHAPES, editions=LATE, points=10.0, course=PATCH_COURSE),
        Binding(role="classifier", component="VisionTransformer", target=f"{M}:VisionTransformer", init=VIT_INIT,
                call=("x",), shapes=VIT_SHAPES, mask=ZERO_BLOCKS, editions=LATE, points=10.0, course=VIT_COURSE),
    ),
    mutants="harness.packs.cs231n.mutants:MUTANTS",
)
