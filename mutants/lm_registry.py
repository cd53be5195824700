"""The `lm` mutants: described, minimal bugs in reference_model/lm.py, one per entry.

Kept apart from MUTANTS (the lessons' tuple, whose causes all have rules in
harness/causes) until the lm diagnoses exist; ``ALL_MUTANTS`` in
mutants/__init__.py joins both for the CLI. Each mutant names the component
(the adapter's part of the model) whose code it edits: a bug in RMSNorm also
changes the block and the LM, but its component is ``rmsnorm``.
Edited lines drop comments that state the correct behaviour.

The last group are interface problems (cause ``interface-mismatch``): the model
is right but the adapter and the module disagree on a key, an argument order,
a dtype or a return value, so the adapter raises or returns None. Some of
them edit reference_model/lm_adapters.py (the student's tests/adapters.py).
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass

from harness.assignments import LM as LM_ASSIGNMENT
from harness.lm_table import NAMES, registry_name

from .model import Edit, Mutant

LM = "reference_model/lm.py"
ADAPTERS = "reference_model/lm_adapters.py"
COMPONENTS = tuple(registry_name(c) for c in NAMES)      # harness/lm_table.py, in the registry's spelling


@dataclass(frozen=True)
class LmMutant(Mutant):
    """A Mutant of the `lm` reference, with the component its edit is in, and the edit that fixes it where the
    lesson's passage states a property rather than what to write (its cause's fix: causes/lm_component.py)."""

    component: str = ""
    fix: str = ""


def _m(id, cause, component, edits, summary, explanation, lesson, reference=LM, fix="") -> LmMutant:
    return LmMutant(id=id, cause=cause, assignment=LM_ASSIGNMENT.name, reference=reference,
                    edits=tuple(Edit(old, new) for old, new in edits), summary=summary,
                    explanation=explanation, lesson=lesson, component=component, fix=fix)


_RMS = "rms = torch.sqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps)  # (..., 1)"
_ROPE_COS = ("cos = self.cos[token_positions]                             # (..., seq, d_k/2)\n"
             "        sin = self.sin[token_positions]")
_ROT = "rot1 = x1 * cos - x2 * sin\n        rot2 = x1 * sin + x2 * cos"
_CAUSAL = "torch.tril(torch.ones(seq, seq, dtype=torch.bool, device=x.device))  # (seq, seq) key j <= query i"
_SWIGLU_DOC = ('"""w2(silu(w1 x) * w3 x): the gate is silu of w1\'s branch, w3\'s branch is linear."""',
               '"""The gated feed-forward layer."""')
_ROPE_DOC = ('"""RoPE: rotates each pair (x[2i], x[2i+1]) by angle position * theta^(-2i/d_k)."""',
             '"""RoPE: rotates pairs of features by angles that grow with the position."""')
_BLOCK_DOC = ('"""Pre-norm: x + attn(ln1(x)), then + ffn(ln2(x)); the residual stream itself is never normalised."""',
              '"""A transformer block: attention, then the feed-forward layer."""')
_ADAMW_DOC = ('"""Adam with decoupled weight decay (Loshchilov & Hutter) and bias correction."""',
              '"""AdamW: Adam with weight decay."""')
_ATTN_RES = "x = x + self.attn(self.ln1(x), token_positions)             # (batch, seq, d_model)"
_FFN_RES = "x = x + self.ffn(self.ln2(x))"
_CE_BODY = ("    logits = logits - logits.amax(dim=-1, keepdim=True)             # (..., vocab), stable\n"
            "    log_z = torch.log(torch.exp(logits).sum(dim=-1))                # (...,) logsumexp\n"
            "    target_logit = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1)  # (...,)\n"
            "    return (log_z - target_logit).mean()\n")
_CLIP = ("    total = torch.sqrt(sum((g.detach().float() ** 2).sum() for g in grads))  # one norm over all of them\n"
         "    if total > max_l2_norm:\n"
         "        scale = max_l2_norm / (total + eps)\n"
         "        for g in grads:\n"
         "            g.mul_(scale)\n")
_DECAY = "                p.mul_(1 - lr * wd)                                           # decoupled decay, scaled by lr\n"

LM_MUTANTS: tuple[LmMutant, ...] = (
    # ---------------------------------------------------------------- linear, silu
    _m("lm-linear-weight-not-transposed", "linear-weight-not-transposed", "linear",
       [("return x @ self.weight.T ", "return x @ self.weight ")],
       "Linear multiplies by W instead of W^T",
       "The weight is stored (d_out, d_in) like nn.Linear, so y = x W^T. Multiplying by W works only "
       "when d_in == d_out (every attention projection), and then silently computes a different "
       "map: each output mixes the inputs with a column of W instead of a row. Use x @ self.weight.T.",
       "Linear: y = W x with W of shape (d_out, d_in); the adapter hands you weights (d_out, d_in)."),
    _m("lm-silu-missing-input-factor", "silu-missing-input-factor", "silu",
       [("return x * torch.sigmoid(x)", "return torch.sigmoid(x)")],
       "SiLU returns sigmoid(x) instead of x * sigmoid(x)",
       "SiLU (swish) is x * sigmoid(x); without the factor x it is just the sigmoid, bounded in (0, 1), "
       "so silu(0) = 0.5 instead of 0 and large inputs saturate at 1 instead of growing.",
       "SiLU(x) = x * sigmoid(x) = x / (1 + exp(-x))."),
    # ---------------------------------------------------------------- rmsnorm
    _m("lm-rmsnorm-eps-outside-sqrt", "rmsnorm-eps-outside-sqrt", "rmsnorm",
       [(_RMS, "rms = torch.sqrt(x.pow(2).mean(dim=-1, keepdim=True)) + self.eps")],
       "RMSNorm adds eps after the square root instead of inside it",
       "eps belongs inside the root: sqrt(mean(x^2) + eps). Added outside, the difference is tiny for "
       "large activations but large for small ones (a row of 1e-3 is divided by 1e-3 + 1e-5 instead of "
       "sqrt(1e-6 + 1e-5)), so outputs no longer have unit RMS near zero.",
       "RMSNorm(a_i) = a_i / RMS(a) * g_i with RMS(a) = sqrt(mean(a^2) + eps)."),
    _m("lm-rmsnorm-wrong-axis", "rmsnorm-wrong-axis", "rmsnorm",
       [("x.pow(2).mean(dim=-1", "x.pow(2).mean(dim=0")],
       "RMSNorm averages the squares over the first axis instead of the feature axis",
       "The mean of squares is taken over dim 0 (the batch), not over d_model. Each token is then "
       "scaled by statistics of other examples: outputs change when another row of the batch changes, "
       "and a token's output is no longer invariant to scaling that token alone.",
       "RMSNorm normalises each activation vector a in R^{d_model} separately, over its d_model entries."),
    _m("lm-rmsnorm-subtracts-mean", "rmsnorm-subtracts-mean", "rmsnorm",
       [("        " + _RMS, "        x = x - x.mean(dim=-1, keepdim=True)\n        " + _RMS)],
       "RMSNorm centres the activations first (a LayerNorm without bias)",
       "RMSNorm does not subtract the mean; only LayerNorm does. With the centring, a vector whose "
       "entries are all equal becomes zero and outputs differ whenever the mean of a row is not 0.",
       "RMSNorm: rescale by the root mean square only; no mean subtraction, no bias."),
    _m("lm-rmsnorm-no-upcast", "rmsnorm-no-float32-upcast", "rmsnorm",
       [("        x = x.to(torch.float32)  # squares of half-precision activations overflow\n", "")],
       "RMSNorm squares half-precision inputs without upcasting to float32",
       "In float16 x^2 overflows to inf for |x| > 256, the RMS becomes inf and the output 0 (or NaN). "
       "Upcast to float32 before squaring and cast the result back to the input dtype.",
       "Upcast the input to torch.float32 before squaring, then downcast the result to the original dtype."),
    _m("lm-rmsnorm-gain-ignored", "rmsnorm-gain-ignored", "rmsnorm",
       [("(x / rms * self.weight)", "(x / rms)")],
       "RMSNorm never multiplies by its learnable gain",
       "The weights handed to the adapter are the gain g; without it every loaded RMSNorm acts as if g = 1, "
       "so outputs are wrong whenever the gain is not all ones (always after training).",
       "RMSNorm(a_i) = a_i / RMS(a) * g_i, g a learnable gain of shape (d_model,)."),
    # ---------------------------------------------------------------- swiglu
    _m("lm-swiglu-silu-on-w3", "swiglu-gate-on-wrong-branch", "swiglu",
       [_SWIGLU_DOC, ("self.w2(silu(self.w1(x)) * self.w3(x))", "self.w2(self.w1(x) * silu(self.w3(x)))")],
       "SwiGLU applies SiLU to the w3 branch instead of the w1 branch",
       "The two up-projections are not interchangeable once weights are loaded by name: silu goes on "
       "w1 x and w3 x stays linear. Swapping them computes a different function with the same shapes.",
       "FFN(x) = W2 (SiLU(W1 x) * W3 x)."),
    _m("lm-swiglu-silu-of-product", "swiglu-silu-of-product", "swiglu",
       [_SWIGLU_DOC, ("self.w2(silu(self.w1(x)) * self.w3(x))", "self.w2(silu(self.w1(x) * self.w3(x)))")],
       "SwiGLU takes silu of the product w1x * w3x",
       "The gate is silu(w1 x) times w3 x; applying silu after multiplying the branches is a different "
       "nonlinearity (a GLU needs one linear branch).",
       "FFN(x) = W2 (SiLU(W1 x) * W3 x)."),
    # ---------------------------------------------------------------- softmax
    _m("lm-softmax-no-max-subtraction", "softmax-overflow", "softmax",
       [("    x = x - x.amax(dim=dim, keepdim=True)  # the largest logit becomes 0: exp never overflows\n", "")],
       "softmax exponentiates the raw inputs; exp overflows at large logits",
       "Without subtracting the maximum, exp(x) is inf for x > 88 in float32 and inf/inf gives NaN. "
       "Softmax is invariant to adding a constant, so subtract the max along dim first.",
       "Subtract the largest entry of the dimension before exponentiating, for numerical stability."),
    _m("lm-softmax-ignores-dim", "softmax-ignores-dim", "softmax",
       [("x.amax(dim=dim, keepdim=True)", "x.amax(dim=-1, keepdim=True)"),
        ("e.sum(dim=dim, keepdim=True)", "e.sum(dim=-1, keepdim=True)")],
       "softmax always normalises the last axis, whatever dim it is given",
       "The dim argument is ignored: results are right only for dim=-1 and wrong for any other axis "
       "(the slices along dim no longer sum to 1).",
       "softmax(x, dim) normalises the given dimension of the input."),
    # ---------------------------------------------------------------- sdpa
    _m("lm-sdpa-softmax-over-queries", "softmax-wrong-dim", "sdpa",
       [("weights = softmax(scores, dim=-1)                               # each query's row sums to 1 over the keys",
         "weights = softmax(scores, dim=-2)")],
       "attention normalises over the queries (dim=-2) instead of the keys",
       "scores are (..., queries, keys); each query needs a distribution over the keys, so softmax runs "
       "over the last axis. Over dim=-2 the columns sum to 1 and the rows do not.",
       "Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V, the softmax over the keys."),
    _m("lm-sdpa-unscaled", "missing-sqrt-dk", "sdpa",
       [("scores = q @ k.transpose(-2, -1) / math.sqrt(d_k) ", "scores = q @ k.transpose(-2, -1) ")],
       "attention scores are not divided by sqrt(d_k)",
       "Without the scale, dot products grow like sqrt(d_k) and the softmax saturates towards one-hot, "
       "with vanishing gradients. Divide the scores by sqrt(d_k).",
       "Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V."),
    _m("lm-sdpa-scaled-by-dk", "attention-scaled-by-dk", "sdpa",
       [("/ math.sqrt(d_k) ", "/ d_k ")],
       "attention scores are divided by d_k instead of sqrt(d_k)",
       "Dividing by d_k over-flattens the attention: with d_k = 64 scores are 8 times too small and the "
       "weights are close to uniform.",
       "Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V."),
    _m("lm-sdpa-mask-inverted", "mask-convention-inverted", "sdpa",
       [("v (..., keys, d_v); mask True = may attend.", "v (..., keys, d_v); mask True = masked."),
        ('scores = scores.masked_fill(~mask, float("-inf"))           # masked keys get weight exactly 0',
         'scores = scores.masked_fill(mask, float("-inf"))')],
       "the boolean mask is read with True = masked, the opposite of the contract",
       "In this interface mask[i, j] = True means query i may attend to key j. Filling where the mask is "
       "True blocks exactly the allowed keys; a causal mask then lets each query see only the future and "
       "the last row is fully masked (NaN).",
       "mask (..., queries, keys) boolean: True where attention is allowed, False where it is not."),
    _m("lm-sdpa-masked-with-zero", "mask-fill-zero", "sdpa",
       [('scores = scores.masked_fill(~mask, float("-inf"))           # masked keys get weight exactly 0',
         "scores = scores.masked_fill(~mask, 0.0)")],
       "masked scores are set to 0 instead of -inf, so masked keys still get weight",
       "A score of 0 is an ordinary score: exp(0) = 1, so masked keys keep a positive weight (often more "
       "than allowed keys with negative scores). Fill with -inf so their softmax weight is exactly 0.",
       "Masked positions must have probability 0: add -inf to their pre-softmax scores."),
    # ---------------------------------------------------------------- rope
    _m("lm-rope-halves-not-pairs", "rope-halves-not-pairs", "rope",
       [_ROPE_DOC,
        ("x1, x2 = x[..., 0::2], x[..., 1::2]                         # the pairs (2i, 2i+1)",
         "half = x.shape[-1] // 2\n        x1, x2 = x[..., :half], x[..., half:]"),
        ("torch.stack((rot1, rot2), dim=-1).flatten(-2).to(x.dtype)  # interleave back: (..., seq, d_k)",
         "torch.cat((rot1, rot2), dim=-1).to(x.dtype)")],
       "RoPE rotates the pairs (i, i + d/2) (the 'rotate_half' layout) instead of (2i, 2i+1)",
       "Both layouts are rotations, so norms are kept and scores still depend only on relative positions, "
       "but they pair different coordinates: with weights trained or given for the interleaved layout the "
       "outputs differ. The assignment rotates adjacent pairs (x[2i], x[2i+1]).",
       "RoPE rotates each pair of embedding elements (2k-1, 2k) by angle i * theta^(-(2k-2)/d)."),
    _m("lm-rope-ignores-token-positions", "rope-ignores-token-positions", "rope",
       [(_ROPE_COS, "cos = self.cos[:x.shape[-2]]                             # (seq, d_k/2)\n"
                    "        sin = self.sin[:x.shape[-2]]")],
       "RoPE uses 0..seq-1 as positions and ignores token_positions",
       "The angles come from the index in the tensor, not from token_positions. Identical when the "
       "positions are 0..seq-1 (so a test with arange positions passes), wrong for any offset or "
       "non-contiguous positions, e.g. when decoding with a cache.",
       "token_positions (..., seq) gives the position of every token; rotate by those positions."),
    _m("lm-rope-frequency-exponent", "rope-frequency-exponent", "rope",
       [_ROPE_DOC, ("torch.arange(0, d_k, 2, dtype=torch.float64) / d_k", "torch.arange(0, d_k // 2, dtype=torch.float64) / d_k")],
       "RoPE frequencies use exponent i/d instead of 2i/d",
       "The exponents run over 0, 1, ..., d/2 - 1 divided by d, so the slowest frequency is "
       "theta^(-1/2) instead of about 1/theta: the angles of the later pairs are far too large.",
       "theta_{i,k} = i / Theta^((2k-2)/d) for k = 1..d/2."),
    _m("lm-rope-rotation-reversed", "rope-rotation-reversed", "rope",
       [_ROPE_DOC, (_ROT, "rot1 = x1 * cos + x2 * sin\n        rot2 = -x1 * sin + x2 * cos")],
       "RoPE rotates by minus the angle (transposed rotation matrix)",
       "The rotation [[cos, -sin], [sin, cos]] is applied transposed, i.e. by -angle. Still a rotation "
       "(norms and relative structure kept), but the sign of every relative offset is flipped against the "
       "reference and the loaded weights.",
       "R = [[cos, -sin], [sin, cos]] acting on (x_{2k-1}, x_{2k})."),
    _m("lm-rope-sin-cos-swapped", "rope-sin-cos-swapped", "rope",
       [('register_buffer("cos", angles.cos()', 'register_buffer("cos", angles.sin()'),
        ('register_buffer("sin", angles.sin()', 'register_buffer("sin", angles.cos()')],
       "RoPE's cos and sin tables are swapped",
       "With sin where cos belongs, position 0 is no longer the identity (cos(0) = 1 became sin(0) = 0): "
       "each pair is rotated by pi/2 - angle instead of angle. Scores stay relative in the positions but see the "
       "offset mirrored (m - n becomes n - m), and no vector is left unchanged at position 0.",
       "At position 0 every angle is 0 and RoPE leaves the vector unchanged.",
       fix="Swap them back where they are computed: cos = torch.cos(angles) and sin = torch.sin(angles) (angle = "
           "position * theta^(-2k/d_k)), then rotate each pair with x1 * cos - x2 * sin and x1 * sin + x2 * cos. "
           "At position 0 (cos 1, sin 0) the vector must come back unchanged."),
    _m("lm-mha-rope-on-values", "rope-on-values", "mha_rope",
       [("            k = self.rope(k, positions)\n",
         "            k = self.rope(k, positions)\n            v = self.rope(v, positions)\n")],
       "RoPE is applied to the values as well as to queries and keys",
       "RoPE encodes positions into the query-key dot product; rotating the values mixes absolute "
       "positions into what attention returns. Rotate q and k only.",
       "Apply RoPE to the query and key vectors, not to the values."),
    # ---------------------------------------------------------------- mha
    _m("lm-mha-causal-sees-next", "causal-mask-off-by-one", "mha",
       [(_CAUSAL, "torch.tril(torch.ones(seq, seq, dtype=torch.bool, device=x.device), diagonal=1)")],
       "the causal mask lets each position see the next token too",
       "tril(..., diagonal=1) keeps one diagonal above the main one: position i attends to i + 1, so the "
       "output at i depends on the token it should predict.",
       "Causal masking: token i may attend to tokens j <= i only."),
    _m("lm-mha-causal-diagonal-masked", "causal-diagonal-masked", "mha",
       [(_CAUSAL, "torch.tril(torch.ones(seq, seq, dtype=torch.bool, device=x.device), diagonal=-1)")],
       "the causal mask also hides each token from itself",
       "tril(..., diagonal=-1) masks the diagonal: token i cannot attend to itself and the first token "
       "has no key at all, so its row is all -inf and the softmax returns NaN.",
       "Causal masking: token i may attend to tokens j <= i only (itself included)."),
    _m("lm-mha-causal-mask-missing", "causal-mask-missing", "mha",
       [("out = scaled_dot_product_attention(q, k, v, causal) ", "out = scaled_dot_product_attention(q, k, v) ")],
       "multi-head self-attention builds the causal mask but never passes it",
       "Without the mask every position attends to every other, later ones included: the output at "
       "position i changes when a later token changes.",
       "Causal masking: token i may attend to tokens j <= i only."),
    _m("lm-mha-causal-triu", "causal-mask-inverted", "mha",
       [(_CAUSAL, "torch.triu(torch.ones(seq, seq, dtype=torch.bool, device=x.device))")],
       "the causal mask uses triu: each position sees the future, not the past",
       "triu keeps j >= i, so every query attends to itself and the later tokens and never to the "
       "earlier ones; the last position sees only itself.",
       "Causal masking: token i may attend to tokens j <= i only (a lower-triangular mask)."),
    _m("lm-mha-heads-split-without-transpose", "heads-split-wrong", "mha",
       [("t.view(*lead, seq, self.num_heads, self.d_head).transpose(-3, -2)",
         "t.view(*lead, self.num_heads, seq, self.d_head)")],
       "heads are split with a view to (heads, seq, d_head) without the transpose",
       "view(..., heads, seq, d_head) on a (seq, d_model) tensor has the right shape but cuts the "
       "sequence into chunks: 'head' h then holds rows of several tokens. View as (seq, heads, d_head) "
       "and transpose.",
       "The rows of q_proj are grouped by head: (num_heads, d_k); split the last axis, then move heads forward."),
    _m("lm-mha-heads-merged-without-transpose", "heads-merge-wrong", "mha",
       [("out.transpose(-3, -2).reshape(*lead, seq, self.d_model)", "out.reshape(*lead, seq, self.d_model)")],
       "head outputs are merged with a reshape without transposing back",
       "out is (..., heads, seq, d_head); reshaping it straight to (..., seq, d_model) interleaves tokens "
       "and heads. Transpose to (..., seq, heads, d_head) first.",
       "Concatenate the heads' outputs for each token, then apply the output projection."),
    _m("lm-mha-output-proj-transposed", "output-projection-transposed", "mha",
       [("return self.output_proj(out)", "return out @ self.output_proj.weight")],
       "the output projection multiplies by W_O instead of W_O^T",
       "output_proj.weight is (d_model, d_model) in (d_out, d_in) layout; using it untransposed runs "
       "without an error because it is square, but applies the transposed map.",
       "MultiHeadSelfAttention(x) = W_O MultiHead(W_Q x, W_K x, W_V x)."),
    _m("lm-mha-einsum-weight-diagonal", "einsum-repeated-index", "mha",
       [("q = self._split_heads(self.q_proj(x))\n        k = self._split_heads(self.k_proj(x))\n"
         "        v = self._split_heads(self.v_proj(x))",
         'q = self._split_heads(torch.einsum("...sd,dd->...sd", x, self.q_proj.weight))\n'
         '        k = self._split_heads(torch.einsum("...sd,dd->...sd", x, self.k_proj.weight))\n'
         '        v = self._split_heads(torch.einsum("...sd,dd->...sd", x, self.v_proj.weight))')],
       "a projection's einsum repeats the weight's index ('...sd,dd->...sd', here for q, k and v): only W's "
       "diagonal is used",
       "A subscript repeated in one operand takes that operand's diagonal: einsum('...sd,dd->...sd', x, W) is "
       "x * diag(W), each feature scaled by one weight, not the projection x W^T, which mixes every input "
       "feature into every output one. With square projection weights nothing raises; the output is wrong. "
       "Give the weight's two axes different letters: einsum('...si,oi->...so', x, W).",
       "Q = x W_Q^T, K = x W_K^T, V = x W_V^T with W of shape (d_out, d_in): each output feature mixes all inputs.",
       fix="Use two different letters for the weight's two axes: torch.einsum('...si,oi->...so', x, W) (or "
           "x @ W.T); a letter repeated in one operand takes that operand's diagonal."),
    # ---------------------------------------------------------------- block
    _m("lm-block-post-norm", "post-norm", "block",
       [_BLOCK_DOC, (_ATTN_RES, "x = self.ln1(x + self.attn(x, token_positions))"),
        (_FFN_RES, "x = self.ln2(x + self.ffn(x))")],
       "the block is post-norm (norm after the residual add) instead of pre-norm",
       "The assignment's block normalises the input of each sub-layer and adds the result to an "
       "untouched residual stream. Post-norm normalises the stream itself after each add.",
       "y = x + MultiHeadSelfAttention(RMSNorm(x)), then z = y + FFN(RMSNorm(y))."),
    _m("lm-block-missing-residual", "missing-residual", "block",
       [_BLOCK_DOC, (_ATTN_RES, "x = self.attn(self.ln1(x), token_positions)")],
       "the attention sub-layer has no residual connection",
       "Without x + ..., the block's output forgets its input; deep stacks lose the direct gradient path.",
       "y = x + MultiHeadSelfAttention(RMSNorm(x))."),
    _m("lm-block-missing-residual-b", "missing-residual", "block",
       [_BLOCK_DOC, (_FFN_RES, "x = self.ffn(self.ln2(x))")],
       "the feed-forward sub-layer has no residual connection",
       "Without y + ..., everything attention added to the stream is only seen through the FFN.",
       "z = y + FFN(RMSNorm(y))."),
    _m("lm-block-norm-on-residual-stream", "residual-stream-normalised", "block",
       [_BLOCK_DOC, (_ATTN_RES, "x = self.ln1(x)\n        x = x + self.attn(x, token_positions)")],
       "ln1 overwrites the residual stream instead of only feeding attention",
       "x = ln1(x) then x = x + attn(x) adds attention to the normalised stream: the un-normalised input "
       "is lost, which is neither pre-norm nor post-norm.",
       "Pre-norm: the residual stream is never normalised; only the sub-layer inputs are."),
    # ---------------------------------------------------------------- lm
    _m("lm-lm-missing-final-norm", "missing-final-norm", "lm",
       [("        x = self.ln_final(x)\n", "")],
       "the LM skips the final RMSNorm before lm_head",
       "With pre-norm blocks the residual stream is never normalised, so the final norm is needed; "
       "without it the logits scale with the stream and ln_final.weight is ignored.",
       "After the last block: RMSNorm (ln_final), then the output linear layer (lm_head)."),
    _m("lm-lm-returns-probabilities", "lm-outputs-softmax", "lm",
       [("return self.lm_head(x)                                      # (batch, seq, vocab): logits, not probabilities",
         "return softmax(self.lm_head(x), dim=-1)")],
       "the LM returns softmax probabilities instead of logits",
       "run_transformer_lm must return unnormalised logits; cross-entropy applies its own log-softmax, "
       "so a softmax here squashes the logits into (0, 1).",
       "The LM returns the unnormalised next-token distribution (logits) for each position."),
    _m("lm-lm-embedding-scaled", "embedding-scaled-by-sqrt-d", "lm",
       [("x = self.token_embeddings(token_ids)                        # (batch, seq, d_model)",
         "x = self.token_embeddings(token_ids) * math.sqrt(self.token_embeddings.weight.shape[1])")],
       "token embeddings are multiplied by sqrt(d_model), as in the original Transformer",
       "This architecture has no embedding scale: the stream starts as the embedding rows themselves. "
       "The factor changes the balance between the residual stream and each block's contribution.",
       "x = token_embeddings[ids], then the blocks; no scaling of the embeddings."),
    # ---------------------------------------------------------------- cross entropy
    _m("lm-cross-entropy-log-of-softmax", "cross-entropy-log-of-softmax", "cross_entropy",
       [("Mean over every leading position of logsumexp(logits) - logits[target].",
         "Mean negative log-probability of the targets."),
        (_CE_BODY, "    probs = softmax(logits, dim=-1)                                 # (..., vocab)\n"
                   "    return -torch.log(probs.gather(-1, targets.unsqueeze(-1)).squeeze(-1)).mean()\n")],
       "cross-entropy takes log(softmax(.)) and returns inf when a probability underflows",
       "softmax rounds tiny probabilities to exactly 0 and log(0) = -inf: with a logit gap over ~104 in "
       "float32 the loss is inf. Compute logsumexp(logits) - logits[target] instead.",
       "Cancel log and exp: loss = -o[target] + log sum_a exp(o[a]), after subtracting the max."),
    _m("lm-cross-entropy-wrong-mean", "cross-entropy-wrong-mean", "cross_entropy",
       [("return (log_z - target_logit).mean()", "return (log_z - target_logit).sum() / logits.shape[-1]")],
       "cross-entropy divides the summed loss by the vocabulary size instead of the batch",
       "The per-example losses are summed and divided by vocab_size, not by the number of examples: the "
       "loss scales with batch / vocab.",
       "Return the average cross-entropy over the batch (every leading position)."),
    _m("lm-cross-entropy-overflow", "cross-entropy-overflow", "cross_entropy",
       [("    logits = logits - logits.amax(dim=-1, keepdim=True)             # (..., vocab), stable\n", "")],
       "cross-entropy exponentiates raw logits; log-sum-exp overflows at large logits",
       "Without subtracting the max, exp(logit) is inf above ~88 in float32 and the loss is inf or NaN.",
       "Subtract the largest element before exponentiating, for numerical stability."),
    # ---------------------------------------------------------------- gradient clipping
    _m("lm-clipping-per-parameter", "clipping-per-parameter", "gradient_clipping",
       [("Scale every gradient by one factor so that their joint L2 norm is at most max_l2_norm.",
         "Clip the gradients to L2 norm at most max_l2_norm."),
        (_CLIP, "    for g in grads:\n"
                "        norm = g.detach().float().norm()\n"
                "        if norm > max_l2_norm:\n"
                "            g.mul_(max_l2_norm / (norm + eps))\n")],
       "gradient clipping clips each parameter's gradient by its own norm",
       "The norm to clip is the L2 norm of all gradients together; clipping each tensor separately "
       "leaves a total norm up to sqrt(#params) * max_l2_norm and changes the gradient's direction.",
       "Compute the l2 norm of all parameter gradients combined; if above the maximum, scale all by one factor."),
    _m("lm-clipping-always-rescales", "clipping-scales-up", "gradient_clipping",
       [(_CLIP, "    total = torch.sqrt(sum((g.detach().float() ** 2).sum() for g in grads))\n"
                "    scale = max_l2_norm / (total + eps)\n"
                "    for g in grads:\n"
                "        g.mul_(scale)\n")],
       "gradient clipping rescales every gradient to the maximum norm, even small ones",
       "Without the 'if total > max_l2_norm' test small gradients are scaled up to the maximum norm; "
       "clipping must leave them unchanged.",
       "If the norm is below the maximum, leave the gradients as they are."),
    # ---------------------------------------------------------------- adamw
    _m("lm-adamw-coupled-weight-decay", "adamw-coupled-weight-decay", "adamw",
       [_ADAMW_DOC, ("                grad = p.grad\n", "                grad = p.grad + wd * p\n"), (_DECAY, "")],
       "AdamW adds the weight decay to the gradient (L2, Adam) instead of decoupling it",
       "Adding wd * p to the gradient puts the decay through the adaptive denominator, which is Adam with "
       "L2 regularisation, not AdamW. Decay the weights directly: p -= lr * wd * p.",
       "theta <- theta - alpha * lambda * theta, applied separately from the moment update."),
    _m("lm-adamw-no-bias-correction", "adamw-no-bias-correction", "adamw",
       [_ADAMW_DOC, ("alpha_t = lr * math.sqrt(1 - beta2 ** t) / (1 - beta1 ** t)  # bias correction", "alpha_t = lr")],
       "AdamW omits the bias correction of the moments",
       "m and v start at 0, so early on they are biased towards 0; without the correction the first "
       "steps have the wrong size (about sqrt(1 - beta2) / (1 - beta1) off at t = 1).",
       "alpha_t = alpha * sqrt(1 - beta2^t) / (1 - beta1^t)."),
    _m("lm-adamw-decay-not-scaled-by-lr", "adamw-decay-not-scaled-by-lr", "adamw",
       [(_DECAY, "                p.mul_(1 - wd)  # decoupled decay\n")],
       "AdamW decays the weights by wd instead of lr * wd",
       "The decoupled decay is theta -= lr * lambda * theta. Without the lr factor the decay is hundreds "
       "of times too strong at usual learning rates and ignores the schedule.",
       "theta <- theta - alpha * lambda * theta."),
    _m("lm-adamw-eps-inside-sqrt", "adamw-eps-inside-sqrt", "adamw",
       [("p.addcdiv_(m, v.sqrt().add_(eps), value=-alpha_t)", "p.addcdiv_(m, (v + eps).sqrt(), value=-alpha_t)")],
       "AdamW adds eps under the square root of v",
       "sqrt(v + eps) with eps = 1e-8 acts like an eps of 1e-4 in the denominator: updates of parameters "
       "with small gradients shrink noticeably.",
       "theta <- theta - alpha_t * m / (sqrt(v) + eps)."),
    # ---------------------------------------------------------------- lr schedule
    _m("lm-schedule-warmup-off-by-one", "schedule-warmup-off-by-one", "lr_schedule",
       [("return it / warmup_iters * max_lr", "return (it + 1) / warmup_iters * max_lr")],
       "warmup counts from 1: the schedule is one step ahead during warmup",
       "At it = 0 the rate must be 0 and it reaches max_lr at it = warmup_iters; (it + 1) / T_w starts at "
       "1 / T_w and reaches the peak one step early.",
       "Warm-up: if t < T_w, alpha_t = t / T_w * alpha_max."),
    _m("lm-schedule-no-floor", "schedule-no-floor", "lr_schedule",
       [("    if it > cosine_cycle_iters:\n        return min_lr\n", "")],
       "after the cosine cycle the schedule keeps following the cosine back up",
       "Past cosine_cycle_iters the rate must stay at min_lr; without the branch the cosine continues "
       "and the learning rate rises again.",
       "Post-annealing: if t > T_c, alpha_t = alpha_min."),
    _m("lm-schedule-cosine-over-full-cycle", "schedule-cosine-length", "lr_schedule",
       [("(it - warmup_iters) / (cosine_cycle_iters - warmup_iters)", "(it - warmup_iters) / cosine_cycle_iters")],
       "the cosine's progress is divided by T_c instead of T_c - T_w",
       "The cosine part lasts from T_w to T_c; dividing by T_c means it has not reached min_lr at T_c "
       "and the schedule jumps down to the floor there.",
       "Cosine annealing: alpha_t = alpha_min + 1/2 (1 + cos((t - T_w) / (T_c - T_w) pi)) (alpha_max - alpha_min)."),
    # ---------------------------------------------------------------- get_batch
    _m("lm-get-batch-targets-not-shifted", "target-not-shifted", "get_batch",
       [("; targets are the inputs shifted by one.", " and their targets."),
        ("y = np.stack([dataset[s + 1:s + 1 + context_length] for s in starts])",
         "y = np.stack([dataset[s:s + context_length] for s in starts])")],
       "get_batch returns the inputs themselves as targets, not shifted by one",
       "Each label must be the next token: y[i] = dataset[start + i + 1]. With y = x the model learns to "
       "copy its input and the loss collapses without learning anything.",
       "The labels are the input sequence shifted by one token."),
    _m("lm-get-batch-one-window", "get-batch-one-window", "get_batch",
       [("starts = np.random.randint(0, len(dataset) - context_length, size=batch_size)",
         "starts = [np.random.randint(0, len(dataset) - context_length)] * batch_size")],
       "get_batch samples one start and repeats that window for the whole batch",
       "Every row of the batch is the same window, so the batch holds one example batch_size times.",
       "Sample batch_size independent starting positions uniformly."),
    # ---------------------------------------------------------------- interface problems
    _m("lm-interface-output-proj-renamed", "interface-mismatch", "mha",
       [("self.output_proj = Linear(", "self.out_proj = Linear("),
        ("return self.output_proj(out)", "return self.out_proj(out)")],
       "the attention's output projection is called out_proj; the contract's key is output_proj",
       "The weights arrive as a state dict keyed attn.output_proj.weight; a module that names its layer "
       "out_proj cannot load them (missing key out_proj.weight, unexpected key output_proj.weight). The "
       "math is fine: rename the attribute or map the key in the adapter.",
       "State dict keys: attn.q_proj.weight, attn.k_proj.weight, attn.v_proj.weight, attn.output_proj.weight."),
    _m("lm-interface-linear-bias", "interface-mismatch", "linear",
       [("        self.weight = nn.Parameter(weight)                          # (d_out, d_in)\n",
         "        self.weight = nn.Parameter(weight)                          # (d_out, d_in)\n"
         "        self.bias = nn.Parameter(torch.zeros(out_features, device=device, dtype=dtype))\n"),
        ("return x @ self.weight.T ", "return x @ self.weight.T + self.bias ")],
       "Linear has a bias the contract does not have",
       "The assignment's Linear has no bias, and the weights given to the adapters have none: loading "
       "them into a layer with a bias fails (missing key bias), and a bias left at its init changes "
       "every output once trained.",
       "Linear(in_features, out_features): y = W x, no bias term."),
    _m("lm-interface-rope-arguments-swapped", "interface-mismatch", "rope",
       [("rope = RotaryPositionalEmbedding(theta, d_k, max_seq_len, device=in_query_or_key.device)",
         "rope = RotaryPositionalEmbedding(d_k, theta, max_seq_len, device=in_query_or_key.device)")],
       "run_rope passes (d_k, theta, ...) to a constructor that takes (theta, d_k, ...)",
       "The adapter's argument order does not match the class's: theta is taken as d_k and d_k as theta, "
       "so the cos/sin tables have the wrong width and RoPE fails to broadcast (or rotates with the "
       "wrong frequencies). Pass the arguments by keyword.",
       "RotaryPositionalEmbedding(theta, d_k, max_seq_len, device=None); run_rope(d_k, theta, max_seq_len, ...)",
       reference=ADAPTERS),
    _m("lm-interface-adapter-returns-none", "interface-mismatch", "rmsnorm",
       [('return _loaded(RMSNorm(d_model, eps=eps), {"weight": weights})(in_features)',
         '_loaded(RMSNorm(d_model, eps=eps), {"weight": weights})(in_features)')],
       "run_rmsnorm computes the output but does not return it",
       "The adapter runs the layer and drops the result: the caller gets None, whatever the model does.",
       "run_rmsnorm returns a tensor with the same shape as in_features.",
       reference=ADAPTERS),
    _m("lm-interface-integer-parameter", "interface-mismatch", "embedding",
       [('_loaded(Embedding(vocab_size, d_model), {"weight": weights})',
         '_loaded(Embedding(vocab_size, d_model, dtype=token_ids.dtype), {"weight": weights})')],
       "run_embedding creates the embedding table with the token ids' integer dtype",
       "dtype=token_ids.dtype makes the table torch.long: the random init is not defined for integers "
       "and an integer tensor cannot be a trainable Parameter, so construction fails. Parameters take "
       "the weights' floating dtype.",
       "Embedding(num_embeddings, embedding_dim, device=None, dtype=None): dtype of the parameters.",
       reference=ADAPTERS),
    _m("lm-interface-swiglu-weights-swapped", "interface-mismatch", "swiglu",
       [('{"w1.weight": w1_weight, "w2.weight": w2_weight, "w3.weight": w3_weight}',
         '{"w1.weight": w1_weight, "w2.weight": w3_weight, "w3.weight": w2_weight}')],
       "run_swiglu loads w3_weight as w2 and w2_weight as w3",
       "w2 is the down-projection (d_model, d_ff) and w3 the second up-projection (d_ff, d_model); "
       "swapping them fails with a size mismatch unless d_ff == d_model, and then computes the wrong map.",
       "run_swiglu(d_model, d_ff, w1_weight, w2_weight, w3_weight, in_features).",
       reference=ADAPTERS),
)


def lm_get(mutant_id: str) -> LmMutant:
    for mutant in LM_MUTANTS:
        if mutant.id == mutant_id:
            return mutant
    close = difflib.get_close_matches(mutant_id, [m.id for m in LM_MUTANTS], n=5, cutoff=0.5)
    hint = f"; did you mean: {', '.join(close)}" if close else ""
    raise KeyError(f"unknown lm mutant {mutant_id!r}{hint}")


def by_component(component: str) -> tuple[LmMutant, ...]:
    """The lm mutants whose edit is in this component, in LM_MUTANTS order."""
    return tuple(m for m in LM_MUTANTS if m.component == component)
