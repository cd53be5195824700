"""The patch embedding puts pixels in the wrong token (a role probe's cause: the patch-embedding role)."""
from .base import Cause
from .role_rules import ASSIGNMENTS, inside, observed, rule

KINDS = ('column-order', 'no-permute', 'several-tokens', 'wrong-token', 'pixel-unused')

CAUSE = Cause(
    id='patch-layout-wrong',
    title='The patch embedding puts pixels in the wrong token',
    what="The image is cut into tokens with the wrong layout: reshaped without moving the patch grid's axes ahead of the channel (a token is a run of one channel's rows, not a p x p patch), the grid's axes swapped (patches numbered column by column), or patches taken from the wrong axes.",
    why="Token k must hold patch k (grid row k // (W/p), column k % (W/p)): the positional encoding gives token k patch k's place, and a token mixing pixels from several patches makes the image's layout meaningless to the model.",
    symptom="Perturbing one pixel of patch k moves another token than k (or several).",
    fix="x.reshape(N, C, H/p, p, W/p, p).permute(0, 2, 4, 1, 3, 5).reshape(N, (H/p)*(W/p), C*p*p): split each spatial axis into (grid, in-patch), move the grid axes first (rows, then columns), then flatten each patch channel by channel (the order a course's check with fixed weights expects).",
    lesson='CS231n assignment 3 (2025), PatchEmbedding: (N, C, H, W) -> (N, num_patches, embed_dim), patches in raster order.',
    assignments=ASSIGNMENTS,
    mechanism="one pixel of each patch perturbed in turn: the tokens that move, against token k alone (the measured token and the expected one), matched with the layouts students write (kinds column-order, no-permute) or not (several-tokens, wrong-token, pixel-unused)",
    observed=observed('patch-embedding', ('layout',), KINDS),
)

_named = rule('patch-embedding', ('layout',), ('column-order', 'no-permute'), explains=('batch',),
              also=inside(('classifier',), ('reference',)))
_other = rule('patch-embedding', ('layout',), KINDS[2:], explains=('batch',),
              also=inside(('classifier',), ('reference',)), confidence=0.8)


def diagnose(ev):
    """A layout students write (named) at 0.9; another wrong layout, measured pixel by pixel, at 0.8."""
    return _named(ev) or _other(ev)
