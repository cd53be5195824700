"""Every mutant, written out by hand, top to bottom.

Each entry is a minimal edit of a lesson's reference model that keeps the file
importable and keeps the lesson's names and signatures. Edits are exact text:
``old`` must occur exactly once in the reference file (tests/test_mutants.py
checks this, and that every mutant really shows its bug in a measurement).
Where an edited line carries a comment that states the correct behaviour
("encoder runs ONCE", "-1e9, not -inf"), the mutant drops that comment: a
student who wrote the bug would not have written it.
"""
from __future__ import annotations

import difflib

from harness.assignments import BLOCK as B
from harness.assignments import REVERSAL as R

from .model import Edit, Mutant

REVERSAL = f"reference_model/{R.reference}"
BLOCK = f"reference_model/{B.reference}"


MUTANTS: tuple[Mutant, ...] = (
    # ------------------------------------------------------------------
    # reversal: "Implementing a Mini Transformer from Scratch"
    # ------------------------------------------------------------------
    Mutant(
        id="reversal-target-not-shifted",
        cause="target-not-shifted",
        assignment=R.name,
        reference=REVERSAL,
        edits=(
            Edit(old="tgt_in, tgt_out = tgt[:, :-1], tgt[:, 1:]",
                 new="tgt_in, tgt_out = tgt[:, :-1], tgt[:, :-1]"),
        ),
        summary="labels are the decoder input itself, not the input shifted by one",
        explanation=(
            "The labels are cut from the target exactly like the decoder input "
            "(tgt[:, :-1] for both), so position i already sees the token it is asked "
            "to predict. The model learns to copy its input: the training loss drops "
            "below 0.05 within a couple of hundred steps, yet greedy decoding, which "
            "starts from <sos> alone, emits <sos> over and over. The labels must be "
            "the input shifted left by one: tgt_in = tgt[:, :-1], tgt_out = tgt[:, 1:]."
        ),
        lesson=(
            "Loss under 0.05 within 200 steps; generation emits one token forever | "
            "Target not shifted right - the model is copying its input"
        ),
    ),
    Mutant(
        id="reversal-target-not-shifted-b",
        cause="target-not-shifted",
        assignment=R.name,
        reference=REVERSAL,
        edits=(
            Edit(old="logits, _ = model(src, tgt_in)",
                 new="logits, _ = model(src, tgt_out)"),
        ),
        summary="the shifted labels are also fed to the decoder as its input",
        explanation=(
            "train() builds tgt_in and tgt_out correctly but then feeds tgt_out, the "
            "labels, to the model. Every position therefore receives the very token it "
            "must predict and the model learns the identity: the loss collapses towards "
            "zero almost at once while generation, which never has the answer as input, "
            "is garbage. The decoder must be given tgt_in (starting with <sos>) and "
            "scored against tgt_out."
        ),
        lesson=(
            "Feed the unshifted target and position i sees token i while being asked to "
            "produce token i: the model learns the identity function"
        ),
    ),
    Mutant(
        id="reversal-causal-mask-inverted",
        cause="causal-mask-inverted",
        assignment=R.name,
        reference=REVERSAL,
        edits=(
            Edit(old="causal = torch.tril(", new="causal = torch.triu("),
        ),
        summary="target_mask uses torch.triu, so each position sees the future, not the past",
        explanation=(
            "torch.triu keeps the upper triangle, so decoder position i may attend to "
            "positions j >= i, every later token included, and not to the earlier ones. "
            "During training the answer is visible in the input, so the training loss "
            "looks excellent, but at generation time the future does not exist yet and "
            "the output is garbage. Changing only the last decoder input token changes "
            "the outputs at earlier positions (the leakage test fails). The causal part "
            "must be torch.tril."
        ),
        lesson=(
            "Training loss excellent, generation is garbage | Causal mask inverted "
            "(triu instead of tril) or missing | Print the mask; run the leakage test"
        ),
    ),
    Mutant(
        id="reversal-causal-mask-missing",
        cause="causal-mask-missing",
        assignment=R.name,
        reference=REVERSAL,
        edits=(
            Edit(old="return pad_m & causal", new="return pad_m"),
        ),
        summary="target_mask returns only the padding mask; the causal part is dropped",
        explanation=(
            "target_mask builds the causal triangle but returns only the padding part, "
            "so the decoder's self-attention may look at every target position, later "
            "ones included. Training with teacher forcing becomes trivially easy (the "
            "next token is in the input) and the loss looks excellent, but generation is "
            "garbage because at inference the future tokens are not there. The leakage "
            "test (change only the last input token) changes earlier outputs. Return "
            "pad_m & causal."
        ),
        lesson=(
            "Training loss excellent, generation is garbage | Causal mask inverted "
            "(triu instead of tril) or missing"
        ),
    ),
    Mutant(
        id="reversal-missing-sqrt-dk",
        cause="missing-sqrt-dk",
        assignment=R.name,
        reference=REVERSAL,
        edits=(
            Edit(old="scores = Q @ K.transpose(-2, -1) / math.sqrt(self.d_k)",
                 new="scores = Q @ K.transpose(-2, -1)"),
        ),
        summary="attention scores are not divided by sqrt(d_k)",
        explanation=(
            "The dot products Q.K have a standard deviation of about sqrt(d_k) (4 here), "
            "so without the division logit gaps of 12 are ordinary and the softmax is "
            "saturated from the first step: one key takes almost all the weight and the "
            "gradient through the softmax is tiny. The loss falls to about 1.2 and stops. "
            "Printing the largest attention weight per row at initialisation shows values "
            "close to 1. Divide the scores by math.sqrt(self.d_k)."
        ),
        lesson=(
            "Loss falls to about 1.2 and stops | Missing sqrt(d_k) - softmax saturated "
            "from step one | Print max attention weight per row"
        ),
    ),
    Mutant(
        id="reversal-no-gradient-flow",
        cause="no-gradient-flow",
        assignment=R.name,
        reference=REVERSAL,
        edits=(
            Edit(old="memory = self.encode(src, src_mask)",
                 new="memory = self.encode(src, src_mask).detach()"),
        ),
        summary="the encoder output is detached, so no gradient ever reaches the encoder",
        explanation=(
            "MiniTransformer.forward detaches the encoder output before handing it to "
            "the decoder. The loss still goes down because the decoder trains, "
            "but the embeddings and encoder layers never receive a gradient (their .grad "
            "stays None) and keep their random initial weights, so the decoder reads a "
            "fixed random encoding of the source. Print the gradient norm of the encoder "
            "parameters: it is zero. Remove .detach()."
        ),
        lesson=(
            "Loss stuck near ln V = 2.565 and never moves | Learning rate far too low, or "
            "gradients not reaching the model | Print grad_norm; if it is 0, an input is "
            "detached or wrapped in no_grad"
        ),
    ),
    Mutant(
        id="reversal-no-gradient-flow-b",
        cause="no-gradient-flow",
        assignment=R.name,
        reference=REVERSAL,
        edits=(
            Edit(
                old=(
                    "        # * sqrt(d_model) brings token embeddings (std ~0.17) to the scale of the PE ([-1, 1])\n"
                    "        x = self.pos(self.src_emb(src) * math.sqrt(self.d_model))  # (B, T_src, d)\n"
                ),
                new=(
                    "        with torch.no_grad():\n"
                    "            x = self.pos(self.src_emb(src) * math.sqrt(self.d_model))  # (B, T_src, d)\n"
                ),
            ),
        ),
        summary="the source embeddings are computed under torch.no_grad() and never train",
        explanation=(
            "encode() looks up the source embeddings inside a torch.no_grad() block, so "
            "autograd records nothing there and src_emb.weight never gets a gradient: the "
            "source tokens stay at their random initial vectors for the whole run while "
            "everything after them trains. Nothing crashes; the model is just worse than "
            "it should be, and the gradient norm of src_emb is exactly zero. no_grad "
            "belongs in evaluation code (greedy_decode), never inside forward."
        ),
        lesson=(
            "Print grad_norm; if it is 0, an input is detached or wrapped in no_grad"
        ),
    ),
    Mutant(
        id="reversal-learning-rate-too-low",
        cause="learning-rate-too-low",
        assignment=R.name,
        reference=REVERSAL,
        edits=(
            Edit(old="def train(model, steps=3000, batch_size=64, lr=1e-3,",
                 new="def train(model, steps=3000, batch_size=64, lr=1e-6,"),
        ),
        summary="train() defaults to lr=1e-6, a thousand times too small",
        explanation=(
            "The default learning rate is 1e-6 instead of 1e-3. Adam's steps are "
            "proportional to the learning rate, so after warmup every parameter moves a "
            "thousand times less than intended: in 3000 steps the model barely leaves its "
            "initialisation and the loss sits near ln 13 = 2.565 (a little above, from "
            "the random output layer). The gradients are fine, the steps are just "
            "microscopic. Use lr=1e-3."
        ),
        lesson=(
            "Loss stuck near ln V = 2.565 and never moves | Learning rate far too low, or "
            "gradients not reaching the model"
        ),
    ),
    Mutant(
        id="reversal-learning-rate-too-low-b",
        cause="learning-rate-too-low",
        assignment=R.name,
        reference=REVERSAL,
        edits=(
            Edit(old="opt = torch.optim.Adam(model.parameters(), lr=lr,",
                 new="opt = torch.optim.Adam(model.parameters(), lr=1e-6,"),
        ),
        summary="Adam is built with a hard-coded lr=1e-6 that ignores train()'s lr argument",
        explanation=(
            "The optimizer is created with lr=1e-6 written in by hand, so whatever lr "
            "is passed to train() is ignored and every step is about a thousand times "
            "too small. The loss stays near ln 13 = 2.565 for the whole run even though "
            "the gradient norms look healthy. Pass lr=lr to Adam."
        ),
        lesson=(
            "Loss stuck near ln V = 2.565 and never moves | Learning rate far too low"
        ),
    ),
    Mutant(
        id="reversal-inf-mask-nan",
        cause="inf-mask-nan",
        assignment=R.name,
        reference=REVERSAL,
        edits=(
            Edit(
                old=(
                    "            # -1e9, not -inf: a fully masked row becomes uniform instead of 0/0 = NaN\n"
                    "            scores = scores.masked_fill(~mask, -1e9)\n"
                ),
                new="            scores = scores.masked_fill(~mask, float('-inf'))\n",
            ),
        ),
        summary="masked scores are filled with float('-inf') instead of -1e9",
        explanation=(
            "Masked scores are set to -inf. That is fine while every row keeps at least "
            "one real key, but as soon as a whole row is masked (an entirely padded "
            "sequence, for example) the softmax computes 0/0 and returns NaN, and one NaN "
            "poisons every parameter on the backward pass: the loss turns into nan. A "
            "large finite negative number such as -1e9 gives a harmless uniform row "
            "instead."
        ),
        lesson=(
            "nan after a few hundred steps | An entirely masked row producing 0/0 in "
            "softmax | Use -1e9 not -inf"
        ),
    ),
    Mutant(
        id="reversal-view-not-contiguous",
        cause="view-not-contiguous",
        assignment=R.name,
        reference=REVERSAL,
        edits=(
            Edit(old="(attn @ V).transpose(1, 2).contiguous().view(B, T_q, self.d_model)",
                 new="(attn @ V).transpose(1, 2).view(B, T_q, self.d_model)"),
        ),
        summary="the heads are merged with .view() straight after .transpose()",
        explanation=(
            "After transpose(1, 2) the tensor is no longer laid out contiguously in "
            "memory, and .view() cannot merge the head and d_k axes of such a tensor. "
            "The first forward pass raises 'view size is not compatible with input "
            "tensor's size and stride'. Call .contiguous() before .view(), or use "
            ".reshape()."
        ),
        lesson=(
            "view() raises \"not contiguous\" | Reshaping straight after transpose | "
            "Insert .contiguous(), or use .reshape()"
        ),
    ),
    Mutant(
        id="reversal-cross-attention-swapped",
        cause="cross-attention-swapped",
        assignment=R.name,
        reference=REVERSAL,
        edits=(
            Edit(old="self.cross_attn(x, memory, memory, src_mask)",
                 new="self.cross_attn(memory, x, x, src_mask)"),
        ),
        summary="cross-attention takes its query from the encoder and keys/values from the decoder",
        explanation=(
            "The arguments of cross_attn are reversed: the query comes from the encoder "
            "memory and the keys and values from the decoder. The output then has one "
            "row per source position instead of one per target position, and the source "
            "padding mask is applied to the target axis. With the lesson's data (target "
            "input one token longer than the source) the first forward pass fails with a "
            "shape mismatch; where the lengths happen to match there is no error at all, "
            "just a model that learns the wrong thing. It must be "
            "cross_attn(x, memory, memory, src_mask)."
        ),
        lesson=(
            "Model ignores the source; output is fluent but unrelated | Cross-attention "
            "arguments swapped | Confirm cross_attn(x, memory, memory)"
        ),
    ),
    Mutant(
        id="reversal-source-ignored",
        cause="source-ignored",
        assignment=R.name,
        reference=REVERSAL,
        edits=(
            Edit(old="x = self.n2(x + self.drop(c))",
                 new="x = self.n2(x + self.drop(a))"),
        ),
        summary="the decoder adds its self-attention output again instead of the cross-attention output",
        explanation=(
            "DecoderLayer computes the cross-attention output c but then adds a, the "
            "self-attention output, a second time. Nothing from the encoder ever reaches "
            "the decoder, so the prediction cannot depend on the source: the output is "
            "fluent but unrelated to the input, the loss plateaus high, and changing the "
            "source does not change the logits at all. Add c: "
            "x = self.n2(x + self.drop(c))."
        ),
        lesson=(
            "Model ignores the source; output is fluent but unrelated | ... or memory not "
            "passed to every layer | Confirm cross_attn(x, memory, memory); plot the map"
        ),
    ),
    Mutant(
        id="reversal-source-ignored-b",
        cause="source-ignored",
        assignment=R.name,
        reference=REVERSAL,
        edits=(
            Edit(old="self.cross_attn(x, memory, memory, src_mask)",
                 new="self.cross_attn(x, x, x, tgt_mask)"),
        ),
        summary="cross-attention attends to the decoder's own states instead of the encoder memory",
        explanation=(
            "The 'cross' attention is given the decoder states as keys and values (and "
            "the target mask), so it is just a second self-attention and the encoder "
            "output is never read. The model cannot see the source: generation is fluent "
            "but unrelated, and the cross-attention maps are target-by-target instead of "
            "target-by-source. Use cross_attn(x, memory, memory, src_mask)."
        ),
        lesson=(
            "If you see a uniform grey field, cross-attention is not being used at all: "
            "check that memory is reaching every decoder layer."
        ),
    ),
    Mutant(
        id="reversal-positional-max-len",
        cause="positional-max-len",
        assignment=R.name,
        reference=REVERSAL,
        edits=(
            Edit(old="self.pos = PositionalEncoding(d_model, max_len, dropout)",
                 new="self.pos = PositionalEncoding(d_model, 16, dropout)"),
        ),
        summary="the positional table is built for 16 positions, ignoring max_len",
        explanation=(
            "MiniTransformer builds its PositionalEncoding with a hard-coded table of 16 "
            "positions instead of max_len. The lesson's sequences (at most 12 tokens with "
            "<sos> and <eos>) fit, so training and evaluation look perfect, but any "
            "sequence longer than 16 fails: self.pe[:, :T] silently returns only 16 rows "
            "and adding it to a longer input raises a size mismatch. Pass max_len."
        ),
        lesson=(
            "Works at length 6, fails at length 30 | max_len in the positional encoding "
            "is too small, or masks built for one length are being reused"
        ),
    ),
    Mutant(
        id="reversal-stale-mask",
        cause="stale-mask",
        assignment=R.name,
        reference=REVERSAL,
        edits=(
            Edit(old="        self.d_model = d_model\n",
                 new="        self.d_model = d_model\n        self.masks = None\n"),
            Edit(
                old=(
                    "        src_mask = padding_mask(src)\n"
                    "        tgt_mask = target_mask(tgt)\n"
                ),
                new=(
                    "        if self.masks is None:\n"
                    "            self.masks = (padding_mask(src), target_mask(tgt))\n"
                    "        src_mask, tgt_mask = self.masks\n"
                ),
            ),
        ),
        summary="forward() builds the masks on its first call and reuses them for every later batch",
        explanation=(
            "MiniTransformer caches the padding and causal masks from the first batch it "
            "sees and reuses them forever. Every later batch is masked with the first "
            "batch's padding pattern, so real tokens are hidden and padding is attended "
            "to, and a batch of a different length either raises a size mismatch or, "
            "when it broadcasts, is silently masked wrong. Build the masks from the "
            "actual tensors on every call."
        ),
        lesson=(
            "Works at length 6, fails at length 30 | ... or masks built for one length "
            "are being reused | Build masks from the actual tensor shapes each step"
        ),
    ),
    Mutant(
        id="reversal-no-warmup",
        cause="no-warmup",
        assignment=R.name,
        reference=REVERSAL,
        edits=(
            Edit(
                old=(
                    "    sched = torch.optim.lr_scheduler.LambdaLR(\n"
                    "        opt, lambda s: min((s + 1) / warmup, 1.0))     # linear warmup, then flat\n"
                ),
                new="",
            ),
            Edit(old="        sched.step()\n", new=""),
            Edit(old="lr {sched.get_last_lr()[0]:.2e}",
                 new="lr {opt.param_groups[0]['lr']:.2e}"),
        ),
        summary="the warmup scheduler is removed; Adam starts at the full learning rate",
        explanation=(
            "There is no learning-rate schedule, so the very first Adam steps are taken "
            "at the full 1e-3 while the moment estimates are still noise. Post-norm "
            "transformers are sensitive to this: the loss oscillates violently from step "
            "1 and training may diverge or settle late. The warmup argument is accepted "
            "but never used. Ramp the learning rate up linearly over the first few "
            "hundred steps (LambdaLR with min((s + 1) / warmup, 1.0))."
        ),
        lesson="Loss oscillates violently from step 1 | No warmup | Linear warmup over a few hundred steps",
    ),
    Mutant(
        id="reversal-no-warmup-b",
        cause="no-warmup",
        assignment=R.name,
        reference=REVERSAL,
        edits=(
            Edit(old="lambda s: min((s + 1) / warmup, 1.0)",
                 new="lambda s: min((s + 1) * warmup, 1.0)"),
        ),
        summary="the warmup lambda multiplies by warmup instead of dividing, so it is always 1.0",
        explanation=(
            "The warmup factor is (s + 1) * warmup instead of (s + 1) / warmup; for any "
            "warmup of 1 or more min(..., 1.0) is 1.0 from the first step, so there is no "
            "warmup at all even though the scheduler is there and the log prints an lr. "
            "The first logged lr is 1.00e-03 instead of 2.50e-06 and the loss oscillates "
            "from step 1. Divide by warmup."
        ),
        lesson="Loss oscillates violently from step 1 | No warmup | Linear warmup over a few hundred steps",
    ),
    Mutant(
        id="reversal-warmup-integer-division",
        cause="warmup-flat-then-jump",
        assignment=R.name,
        reference=REVERSAL,
        edits=(
            Edit(old="        opt, lambda s: min((s + 1) / warmup, 1.0))     # linear warmup, then flat\n",
                 new="        opt, lambda s: min((s + 1) // warmup, 1))\n"),
        ),
        summary="the warmup factor uses integer division: 0 for the whole warmup, then the full lr at once",
        explanation=(
            "(s + 1) // warmup is an integer division: it is 0 for the first 399 steps and 1 from step "
            "400. The learning rate is therefore exactly 0 for the whole warmup (nothing trains, the loss "
            "sits at its initial value) and then jumps to the full 1e-3 in one step, which is the abrupt "
            "start a warmup is meant to avoid, just 400 steps late. The log prints lr 0.00e+00 for the first "
            "400 steps. Divide as floats: min((s + 1) / warmup, 1.0)."
        ),
        lesson="Loss oscillates violently from step 1 | No warmup | Linear warmup over a few hundred steps",
    ),
    Mutant(
        id="reversal-softmax-wrong-dim",
        cause="softmax-wrong-dim",
        assignment=R.name,
        reference=REVERSAL,
        edits=(
            Edit(old="torch.softmax(scores, dim=-1)", new="torch.softmax(scores, dim=-2)"),
        ),
        summary="attention softmax normalises over queries (dim=-2) instead of keys",
        explanation=(
            "The scores have shape (B, h, T_q, T_k); each row is one query against all "
            "keys, so the softmax must run over the last axis. With dim=-2 each column "
            "sums to 1 instead, the rows are not probability distributions, and every "
            "output mixes values with meaningless weights - and for the decoder the "
            "normalisation over queries even leaks information across target positions. "
            "Shapes are identical, so there is no error, just a model that does not "
            "learn properly. Use dim=-1."
        ),
        lesson=(
            "dim=-1 in the softmax. ... normalisation runs over keys, the last axis. "
            "Using dim=-2 produces identical shapes, no error, and a meaningless model."
        ),
    ),
    Mutant(
        id="reversal-softmax-wrong-dim-b",
        cause="softmax-wrong-dim",
        assignment=R.name,
        reference=REVERSAL,
        edits=(
            Edit(old="torch.softmax(scores, dim=-1)", new="torch.softmax(scores, dim=2)"),
        ),
        summary="attention softmax over dim=2, which for (B, h, T_q, T_k) is the query axis",
        explanation=(
            "dim=2 looks like 'the last of the two score axes', but the scores are 4-D "
            "(B, h, T_q, T_k), so axis 2 is the query axis. The softmax normalises "
            "columns instead of rows, no row of attention weights sums to 1, and the "
            "model learns badly without any error message. Use dim=-1 (the key axis)."
        ),
        lesson=(
            "dim=-1 in the softmax. Each row of the score matrix is one query against all "
            "keys, so normalisation runs over keys, the last axis."
        ),
    ),
    Mutant(
        id="reversal-data-not-reversed",
        cause="data-not-reversed",
        assignment=R.name,
        reference=REVERSAL,
        edits=(
            Edit(old="tgt[i, 1:L + 1] = seq.flip(0)      # the reversal",
                 new="tgt[i, 1:L + 1] = seq"),
        ),
        summary="make_batch forgets .flip(0): the target copies the source instead of reversing it",
        explanation=(
            "make_batch writes the source sequence into the target unchanged, so the task "
            "becomes copying, not reversing. The model trains happily (copying is easy) "
            "and the loss looks great, but it never reverses anything, and its "
            "cross-attention map shows a bright main diagonal instead of the anti-diagonal. "
            "Print a few examples: the target should be the source backwards."
        ),
        lesson=(
            "If you instead see a bright main diagonal, the model is copying rather than "
            "reversing - which means your data generation forgot the .flip(0)."
        ),
    ),
    Mutant(
        id="reversal-positional-encoding-formula",
        cause="positional-encoding-formula",
        assignment=R.name,
        reference=REVERSAL,
        edits=(
            Edit(
                old=(
                    "        div = torch.exp(torch.arange(0, d_model, 2).float()\n"
                    "                        * (-math.log(10000.0) / d_model))          # (d/2,)\n"
                ),
                new=(
                    "        div = torch.exp(torch.arange(0, d_model // 2).float()\n"
                    "                        * (-math.log(10000.0) / d_model))          # (d/2,)\n"
                ),
            ),
        ),
        summary="the positional frequencies use exponent i/d instead of 2i/d",
        explanation=(
            "The frequency for the pair of columns (2i, 2i+1) is computed with exponent "
            "i/d instead of 2i/d, so the frequencies only fall to about 1/100 instead of "
            "1/10000 and the slow, long-range columns are missing. Shapes are right and "
            "nothing crashes, but the positional table does not match the formula and the "
            "model gets a poorer position signal. Plot the table or compare it with the "
            "formula: the exponent must be 2i/d (torch.arange(0, d_model, 2))."
        ),
        lesson=(
            "Writing 10000 ** (-2*i/d) directly gives the same values; what you must not "
            "get wrong is the exponent 2i/d."
        ),
    ),
    Mutant(
        id="reversal-positional-encoding-formula-b",
        cause="positional-encoding-formula",
        assignment=R.name,
        reference=REVERSAL,
        edits=(
            Edit(old="pe[:, 0::2] = torch.sin(pos * div)", new="pe[:, 0::2] = torch.cos(pos * div)"),
            Edit(old="pe[:, 1::2] = torch.cos(pos * div)", new="pe[:, 1::2] = torch.sin(pos * div)"),
        ),
        summary="sin and cos are swapped: cos in the even columns, sin in the odd ones",
        explanation=(
            "The even columns get cos and the odd columns sin, the opposite of "
            "PE(pos, 2i) = sin, PE(pos, 2i+1) = cos. The model can still train, but the "
            "table is not the lesson's encoding (position 0 is 1, 0, 1, 0, ... instead of "
            "0, 1, 0, 1, ...), so anything that relies on the standard table, such as "
            "comparing against a reference or loading weights, disagrees. Put sin in "
            "0::2 and cos in 1::2."
        ),
        lesson=(
            "PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(pos / 10000^(2i/d))"
        ),
    ),
    Mutant(
        id="reversal-positional-encoding-trainable",
        cause="positional-encoding-trainable",
        assignment=R.name,
        reference=REVERSAL,
        edits=(
            Edit(
                old=(
                    "        # a buffer, not a Parameter: saved and moved by .to(), never trained\n"
                    "        self.register_buffer('pe', pe.unsqueeze(0))                # (1, max_len, d)\n"
                ),
                new="        self.pe = nn.Parameter(pe.unsqueeze(0))                # (1, max_len, d)\n",
            ),
        ),
        summary="the positional table is an nn.Parameter, so the optimiser trains it",
        explanation=(
            "The sinusoidal table is stored as an nn.Parameter instead of a buffer. It is "
            "now returned by model.parameters(), receives gradients and is changed by "
            "Adam, so the fixed encoding drifts away from the formula during training, "
            "and the parameter count grows by max_len * d_model (4,096 at the defaults: "
            "240,077 instead of 235,981). Use self.register_buffer('pe', ...)."
        ),
        lesson=(
            "register_buffer rather than nn.Parameter: this table is a constant. ... it "
            "must never receive a gradient."
        ),
    ),
    Mutant(
        id="reversal-missing-embedding-scale",
        cause="missing-embedding-scale",
        assignment=R.name,
        reference=REVERSAL,
        edits=(
            Edit(
                old=(
                    "        # * sqrt(d_model) brings token embeddings (std ~0.17) to the scale of the PE ([-1, 1])\n"
                    "        x = self.pos(self.src_emb(src) * math.sqrt(self.d_model))  # (B, T_src, d)\n"
                ),
                new="        x = self.pos(self.src_emb(src))  # (B, T_src, d)\n",
            ),
            Edit(old="x = self.pos(self.tgt_emb(tgt) * math.sqrt(self.d_model))",
                 new="x = self.pos(self.tgt_emb(tgt))"),
        ),
        summary="token embeddings are not multiplied by sqrt(d_model) before the positional encoding",
        explanation=(
            "The embeddings are added to the positional encoding without the factor "
            "sqrt(d_model) = 8. With Xavier initialisation the token vectors have a "
            "standard deviation of about 0.17 while the positional table spans [-1, 1], "
            "so the position signal is roughly four times larger than the token signal "
            "and early training is dominated by position. The model learns more slowly. "
            "Multiply the embeddings by math.sqrt(self.d_model) in encode and decode."
        ),
        lesson=(
            "Without the scaling the position signal is roughly four times larger than the "
            "token signal ... Multiplying by sqrt(64) = 8 brings the token embeddings to a "
            "comparable scale."
        ),
    ),
    Mutant(
        id="reversal-bad-output-init",
        cause="bad-output-init",
        assignment=R.name,
        reference=REVERSAL,
        edits=(
            Edit(old="return self.generator(out), maps",
                 new="return self.generator(out) * math.sqrt(self.d_model), maps"),
        ),
        summary="the logits are multiplied by sqrt(d_model), so they start eight times too large",
        explanation=(
            "The output logits are scaled by sqrt(d_model) = 8 (a copy of the embedding "
            "scale into the wrong place). At initialisation their standard deviation is "
            "about 10 instead of 1.3, the model is confidently wrong about random tokens "
            "and the first logged loss is far above the healthy 2.5-3.5 (ln 13 = 2.565 "
            "plus a small offset). Training starts from a bad place and is unstable. "
            "Return self.generator(out) unscaled."
        ),
        lesson=(
            "Anything from about 2.5 to 3.5 is healthy. If your first loss is 8.0, the "
            "output layer or the initialisation is wrong."
        ),
    ),
    Mutant(
        id="reversal-bad-output-init-b",
        cause="bad-output-init",
        assignment=R.name,
        reference=REVERSAL,
        edits=(
            Edit(
                old="                nn.init.xavier_uniform_(p)\n",
                new=(
                    "                nn.init.xavier_uniform_(p)\n"
                    "        nn.init.normal_(self.generator.weight, std=1.0)\n"
                ),
            ),
        ),
        summary="the output layer is re-initialised with N(0, 1) weights, far too large",
        explanation=(
            "After the Xavier loop the generator weights are re-drawn from a standard "
            "normal. The decoder output has unit-scale features over 64 dimensions, so "
            "the logits start with a standard deviation of about 8: the first loss is far "
            "above the healthy 2.5-3.5 and the first updates are large and erratic. Keep "
            "the Xavier initialisation (weights of order 1/sqrt(d_model))."
        ),
        lesson=(
            "If your first loss is 8.0, the output layer or the initialisation is wrong."
        ),
    ),
    Mutant(
        id="reversal-missing-residual",
        cause="missing-residual",
        assignment=R.name,
        reference=REVERSAL,
        edits=(
            Edit(old="x = self.n1(x + self.drop(a))            # residual, then normalise",
                 new="x = self.n1(self.drop(a))"),
        ),
        summary="the encoder's self-attention sublayer has no residual connection",
        explanation=(
            "EncoderLayer replaces x by the normalised attention output instead of adding "
            "it to x, so the token's own embedding only survives through the attention "
            "weights and the identity path for the gradient is gone. Depth becomes hard "
            "to train: each layer multiplies the gradient instead of adding an identity "
            "term, and the model struggles to memorise even one batch. Write "
            "x = self.n1(x + self.drop(a))."
        ),
        lesson=(
            "The residual connection x + sublayer(x) is what makes depth trainable. Its "
            "derivative is I + dF/dx"
        ),
    ),
    Mutant(
        id="reversal-dropout-on-residual-stream",
        cause="dropout-on-residual-stream",
        assignment=R.name,
        reference=REVERSAL,
        edits=(
            Edit(old="x = self.n1(x + self.drop(a))            # residual, then normalise",
                 new="x = self.drop(self.n1(x + a))"),
        ),
        summary="the encoder's dropout wraps the residual add and the norm, so it drops the whole stream",
        explanation=(
            "EncoderLayer applies its dropout after the residual add and the LayerNorm instead of to the "
            "attention output: in training 10% of the whole residual stream, each token's own representation "
            "included, is set to 0 (and the rest scaled by 1/0.9) at every step. Evaluation is unchanged, since "
            "dropout is off there, so the model looks fine at inference while it trains on a damaged stream. "
            "Drop the sublayer's output only: x = self.n1(x + self.drop(a))."
        ),
        lesson="x = self.n1(x + self.drop(a))            # residual, then normalise",
    ),
    Mutant(
        id="reversal-encoder-in-decode-loop",
        cause="encoder-in-decode-loop",
        assignment=R.name,
        reference=REVERSAL,
        edits=(
            Edit(
                old=(
                    "    memory = model.encode(src, src_mask)               # encoder runs ONCE\n"
                    "    ys = torch.full((src.size(0), 1), SOS, dtype=torch.long, device=src.device)\n"
                    "    for _ in range(max_len - 1):\n"
                ),
                new=(
                    "    ys = torch.full((src.size(0), 1), SOS, dtype=torch.long, device=src.device)\n"
                    "    for _ in range(max_len - 1):\n"
                    "        memory = model.encode(src, src_mask)\n"
                ),
            ),
        ),
        summary="greedy_decode re-runs the encoder at every generated token",
        explanation=(
            "The encoder output depends only on the source, which does not change while "
            "decoding, yet greedy_decode calls model.encode inside the loop. The result is "
            "identical but the encoder runs once per generated token instead of once per "
            "sequence, so generation is several times slower for nothing. Compute memory "
            "once, before the loop."
        ),
        lesson=(
            "The encoder runs once, outside the loop - recomputing the memory at every "
            "decode step is a common and entirely wasteful mistake."
        ),
    ),
    Mutant(
        id="reversal-padding-mask-inverted",
        cause="padding-mask-inverted",
        assignment=R.name,
        reference=REVERSAL,
        edits=(
            Edit(old="return (x != pad).unsqueeze(1).unsqueeze(2)",
                 new="return (x == pad).unsqueeze(1).unsqueeze(2)"),
        ),
        summary="padding_mask is True at the padding, so attention sees only <pad> tokens",
        explanation=(
            "padding_mask should be True where the token is real; with == it is True at "
            "the padding instead. In every padded sequence the encoder self-attention and "
            "the cross-attention look only at <pad> positions and ignore the real tokens "
            "(and an unpadded sequence has every key masked, giving uniform attention). "
            "For padded inputs the prediction cannot depend on the source digits at all. "
            "Use x != pad."
        ),
        lesson='padding_mask: "(B, T) -> (B, 1, 1, T); True where the token is real."',
    ),
    Mutant(
        id="reversal-pad-not-ignored",
        cause="pad-not-ignored",
        assignment=R.name,
        reference=REVERSAL,
        edits=(
            Edit(
                old=(
                    "            logits.reshape(-1, VOCAB), tgt_out.reshape(-1),\n"
                    "            ignore_index=PAD)\n"
                ),
                new="            logits.reshape(-1, VOCAB), tgt_out.reshape(-1))\n",
            ),
        ),
        summary="the loss does not pass ignore_index=PAD, so padding positions are scored",
        explanation=(
            "cross_entropy is called without ignore_index=PAD, so every padding position "
            "in the batch counts as a label. The model spends capacity learning to predict "
            "<pad> after <eos>, which is trivial and makes the loss look better than the "
            "real task is going, and the loss depends on how much padding a batch has. "
            "Pass ignore_index=PAD."
        ),
        lesson=(
            "loss = F.cross_entropy(logits.reshape(-1, VOCAB), tgt_out.reshape(-1), "
            "ignore_index=PAD)"
        ),
    ),
    Mutant(
        id="reversal-heads-split-wrong",
        cause="heads-split-wrong",
        assignment=R.name,
        reference=REVERSAL,
        edits=(
            Edit(old="return x.view(B, T, self.h, self.d_k).transpose(1, 2)",
                 new="return x.view(B, self.h, T, self.d_k)"),
        ),
        summary="heads are split with view(B, h, T, d_k), which scrambles positions across heads",
        explanation=(
            "view(B, self.h, T, self.d_k) has the right shape but the wrong meaning: it "
            "cuts the flat (T, d_model) memory into h blocks of consecutive positions, so "
            "each 'head' row mixes features from different positions. Attention no longer "
            "treats positions as units; permuting the input no longer simply permutes the "
            "output. There is no error, only a model that learns badly. Split as "
            "view(B, T, h, d_k).transpose(1, 2)."
        ),
        lesson="return x.view(B, T, self.h, self.d_k).transpose(1, 2)    # (B, h, T, d_k)",
    ),
    Mutant(
        id="reversal-dropout-at-inference",
        cause="dropout-at-inference",
        assignment=R.name,
        reference=REVERSAL,
        edits=(
            Edit(old="attn = self.dropout(torch.softmax(scores, dim=-1))         # normalise over keys",
                 new="attn = F.dropout(torch.softmax(scores, dim=-1), p=0.1)"),
        ),
        summary="the attention weights go through F.dropout, whose training argument defaults to True",
        explanation=(
            "F.dropout(x, p) drops with probability p whenever it is called: its training argument "
            "defaults to True and knows nothing of model.eval(). The attention weights are dropped at "
            "inference as well, so two evaluations of the same batch differ and greedy decoding is "
            "noisy. Use the nn.Dropout module (self.dropout, which follows model.train()/model.eval()) "
            "or pass training=self.training."
        ),
        lesson="attn = self.dropout(torch.softmax(scores, dim=-1))         # normalise over keys",
    ),
    Mutant(
        id="reversal-dropout-on-masked-scores",
        cause="dropout-on-masked-scores",
        assignment=R.name,
        reference=REVERSAL,
        edits=(
            Edit(old="attn = self.dropout(torch.softmax(scores, dim=-1))         # normalise over keys",
                 new="attn = torch.softmax(self.dropout(scores), dim=-1)"),
        ),
        summary="the attention dropout is applied to the masked scores before the softmax",
        explanation=(
            "The dropout is moved inside the softmax, onto the scores the mask has already filled with -1e9. "
            "In training it zeroes 10% of them, masked entries included, and a score of 0 is an ordinary logit: "
            "the softmax gives those future decoder positions (and padded source positions) real weight, so "
            "the decoder learns from tokens it cannot have at generation time. In eval mode dropout is off and "
            "the leakage test passes. Drop the weights after the softmax: "
            "attn = self.dropout(torch.softmax(scores, dim=-1))."
        ),
        lesson="attn = self.dropout(torch.softmax(scores, dim=-1))         # normalise over keys",
    ),
    Mutant(
        id="reversal-digits-exclusive-bound",
        cause="data-digits-missing",
        assignment=R.name,
        reference=REVERSAL,
        edits=(
            Edit(old="        seq = torch.randint(0, 10, (L,))\n",
                 new="        seq = torch.randint(0, 9, (L,))\n"),
        ),
        summary="make_batch draws digits with torch.randint(0, 9), whose upper bound is exclusive",
        explanation=(
            "torch.randint(low, high) draws from low to high - 1, so randint(0, 9) never "
            "draws a 9 (Python's random.randint(0, 9) would). Every target is still the "
            "reversed source and the loss falls normally, but the model never sees a 9, "
            "never emits one, and fails every test sequence that contains one. "
            "Use torch.randint(0, 10, (L,))."
        ),
        lesson="seq = torch.randint(0, 10, (L,))",
    ),
    Mutant(
        id="reversal-decode-stops-on-first-row",
        cause="decode-stops-early",
        assignment=R.name,
        reference=REVERSAL,
        edits=(
            Edit(old="        if (next_tok == EOS).all():\n",
                 new="        if next_tok[0, 0] == EOS:\n"),
        ),
        summary="greedy_decode stops when the first row of the batch emits EOS",
        explanation=(
            "The stop test looks at row 0 only. When the first sequence of a batch ends, "
            "decoding stops for all of them, and every longer sequence is cut short "
            "without its EOS. Teacher-forced training never runs greedy_decode, so the "
            "loss is fine; batched evaluation under-reports accuracy. Stop when every "
            "row has emitted EOS: (next_tok == EOS).all() over rows tracked as done."
        ),
        lesson="if (next_tok == EOS).all(): break",
    ),
    Mutant(
        id="reversal-optimizer-groups-by-name",
        cause="optimizer-missing-parameters",
        assignment=R.name,
        reference=REVERSAL,
        edits=(
            Edit(old="    opt = torch.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.98), eps=1e-9)\n",
                 new=("    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]\n"
                      "    no_decay = [p for n, p in model.named_parameters() if n.endswith('bias')]\n"
                      "    opt = torch.optim.AdamW([{'params': decay, 'weight_decay': 0.01},\n"
                      "                             {'params': no_decay, 'weight_decay': 0.0}],\n"
                      "                            lr=lr, betas=(0.9, 0.98), eps=1e-9)\n")),
        ),
        summary="AdamW's param groups are chosen by shape and name and leave the LayerNorm weights out",
        explanation=(
            "The weight-decay groups take the matrices (dim >= 2) and the parameters whose name ends in "
            "'bias'. The LayerNorm gains (n1.weight, n2.weight, ...) are neither, so they are in no group: "
            "they get gradients that no optimizer ever applies and stay at 1.0 for the whole run. Nothing "
            "fails, the model just trains with its normalisations frozen. Every trainable parameter must be "
            "in some group: put the 1-D parameters (biases and norm weights) in the no-decay group "
            "(p.dim() < 2), or check that the groups together hold model.parameters()."
        ),
        lesson="opt = torch.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.98), eps=1e-9)",
    ),
    # ------------------------------------------------------------------
    # block: "Transformers & Attention from Scratch"
    # ------------------------------------------------------------------
    Mutant(
        id="block-softmax-wrong-dim",
        cause="softmax-wrong-dim",
        assignment=B.name,
        reference=BLOCK,
        edits=(
            Edit(old="weights = F.softmax(scores, dim=-1)", new="weights = F.softmax(scores, dim=-2)"),
        ),
        summary="attention softmax normalises over queries (dim=-2) instead of keys",
        explanation=(
            "Row i of the weights should be token i's distribution over all tokens, so the "
            "softmax must run over the last axis. With dim=-2 the columns sum to 1 and the "
            "rows do not, so an output row is no longer a weighted average of the value "
            "vectors, and with the causal flag each weight is normalised against the "
            "scores of later positions, so the future leaks in. Shapes are unchanged, so "
            "nothing complains. Use dim=-1."
        ),
        lesson="weights = F.softmax(scores, dim=-1)      # (5, 5) -- each row sums to 1",
    ),
    Mutant(
        id="block-missing-sqrt-dk",
        cause="missing-sqrt-dk",
        assignment=B.name,
        reference=BLOCK,
        edits=(
            Edit(old="scores = q @ k.transpose(-2, -1) / (self.d_head ** 0.5)",
                 new="scores = q @ k.transpose(-2, -1)"),
        ),
        summary="attention scores are not divided by sqrt(d_head)",
        explanation=(
            "Q.K sums d_head products, so its variance grows with d_head; without the "
            "division the scores are large, the softmax saturates (one key takes nearly "
            "all the weight) and its gradient vanishes, just as a saturated sigmoid stalls "
            "training. Divide by self.d_head ** 0.5."
        ),
        lesson=(
            "Dividing by sqrt(d_head) rescales the scores' variance back down to roughly "
            "1 regardless of head dimension, keeping softmax in its sensitive range"
        ),
    ),
    Mutant(
        id="block-causal-mask-missing",
        cause="causal-mask-missing",
        assignment=B.name,
        reference=BLOCK,
        edits=(
            Edit(old="x = self.norm1(x + self.attn(x, causal=causal))",
                 new="x = self.norm1(x + self.attn(x))"),
        ),
        summary="TransformerBlock.forward never passes the causal flag to the attention",
        explanation=(
            "The block resolves its causal flag but calls self.attn(x) without it, so the "
            "attention always runs unmasked. A causal block can see the future: the upper "
            "triangle of the weights is not zero, and a GPT-style model trained this way "
            "cheats during training and fails at generation. Pass causal=causal."
        ),
        lesson=(
            "Verify by printing weights for a causal block and confirming the upper "
            "triangle is exactly zero"
        ),
    ),
    Mutant(
        id="block-causal-mask-inverted",
        cause="causal-mask-inverted",
        assignment=B.name,
        reference=BLOCK,
        edits=(
            Edit(old="future = torch.triu(", new="future = torch.tril("),
            Edit(old="device=x.device), diagonal=1)", new="device=x.device), diagonal=-1)"),
        ),
        summary="the causal mask blanks out the past (strict lower triangle) instead of the future",
        explanation=(
            "The mask is built with torch.tril(..., diagonal=-1), the strict lower "
            "triangle, so position i may attend to itself and every later position but "
            "not to the earlier ones. The causal block sees the future and is blind to "
            "the past: the upper triangle of the weights is non-zero. Mask "
            "torch.triu(..., diagonal=1)."
        ),
        lesson=(
            "mask scores before the softmax so that position i can only attend to "
            "positions j <= i"
        ),
    ),
    Mutant(
        id="block-causal-diagonal-masked",
        cause="causal-diagonal-masked",
        assignment=B.name,
        reference=BLOCK,
        edits=(
            Edit(old="device=x.device), diagonal=1)", new="device=x.device), diagonal=0)"),
        ),
        summary="the causal mask also blanks out the diagonal, so the first row is fully masked",
        explanation=(
            "With diagonal=0 the mask covers the diagonal as well, so position i may only "
            "attend to j < i. Position 0 has nothing left: its whole row is -inf and the "
            "softmax returns NaN, which spreads through the block (and into every "
            "gradient). Even the other positions cannot see their own token. Use "
            "diagonal=1 so that j <= i is allowed."
        ),
        lesson="position i can only attend to positions j <= i (set disallowed entries to -inf)",
    ),
    Mutant(
        id="block-heads-split-wrong",
        cause="heads-split-wrong",
        assignment=B.name,
        reference=BLOCK,
        edits=(
            Edit(old="out = out.transpose(0, 1).reshape(seq_len, d_model)",
                 new="out = out.reshape(seq_len, d_model)"),
        ),
        summary="heads are merged with reshape but without transposing back first",
        explanation=(
            "out has shape (heads, seq, d_head); reshaping it straight to (seq, d_model) "
            "without transpose(0, 1) glues together rows from different positions, so "
            "output row i is built from the head outputs of other tokens. No error, but "
            "permuting the input tokens no longer permutes the output the same way, and "
            "the block mixes information between positions it should keep apart. "
            "Transpose back to (seq, heads, d_head) before reshaping."
        ),
        lesson="out = out.transpose(0, 1).reshape(seq_len, d_model)       # back to (seq, d_model)",
    ),
    Mutant(
        id="block-dropout-at-inference",
        cause="dropout-at-inference",
        assignment=B.name,
        reference=BLOCK,
        edits=(
            Edit(old="weights = F.softmax(scores, dim=-1)                     # each row sums to 1",
                 new="weights = F.dropout(F.softmax(scores, dim=-1), p=0.1)"),
        ),
        summary="dropout on the attention weights with F.dropout, which stays on after model.eval()",
        explanation=(
            "F.dropout(x, p) drops with probability p on every call: its training argument defaults to "
            "True, so the block is random in eval mode too; two passes of the same tokens differ. Keep an "
            "nn.Dropout module in __init__ and call it (it follows model.train()/model.eval()), or pass "
            "training=self.training."
        ),
        lesson="weights = F.softmax(scores, dim=-1)                     # each row sums to 1",
    ),
    Mutant(
        id="block-heads-split-wrong-b",
        cause="heads-split-wrong",
        assignment=B.name,
        reference=BLOCK,
        edits=(
            Edit(old="q = q.view(seq_len, self.n_heads, self.d_head).transpose(0, 1)",
                 new="q = q.reshape(self.n_heads, seq_len, self.d_head)"),
            Edit(old="k = k.view(seq_len, self.n_heads, self.d_head).transpose(0, 1)",
                 new="k = k.reshape(self.n_heads, seq_len, self.d_head)"),
            Edit(old="v = v.view(seq_len, self.n_heads, self.d_head).transpose(0, 1)",
                 new="v = v.reshape(self.n_heads, seq_len, self.d_head)"),
        ),
        summary="q, k, v are split into heads with reshape(heads, seq, d_head) instead of view + transpose",
        explanation=(
            "reshape(self.n_heads, seq_len, self.d_head) gives the right shape but cuts "
            "the (seq, d_model) matrix into blocks of consecutive positions, so a 'head' "
            "row mixes features of different tokens. (With .view the same line fails, "
            "because the chunks of qkv are not contiguous; switching to .reshape silences "
            "the error without fixing the order.) Attention no longer treats tokens as "
            "units and loses permutation equivariance, silently. Split with "
            "view(seq_len, n_heads, d_head).transpose(0, 1)."
        ),
        lesson="q = q.view(seq_len, self.n_heads, self.d_head).transpose(0, 1)   # (heads, seq, d_head)",
    ),
    Mutant(
        id="block-missing-residual",
        cause="missing-residual",
        assignment=B.name,
        reference=BLOCK,
        edits=(
            Edit(old="x = self.norm1(x + self.attn(x, causal=causal))",
                 new="x = self.norm1(self.attn(x, causal=causal))"),
        ),
        summary="the attention sublayer has no residual connection",
        explanation=(
            "The block replaces x by the normalised attention output instead of adding "
            "it, so the input only survives through the attention. The identity path for "
            "the gradient (d(x + f(x))/dx = 1 + df/dx) is gone and stacks of such blocks "
            "suffer vanishing gradients. Write x = self.norm1(x + self.attn(x, causal=causal))."
        ),
        lesson=(
            "The residual add (x + self.attn(x)) gives backward() a direct additive path "
            "back to the input"
        ),
    ),
    Mutant(
        id="block-positional-encoding-formula",
        cause="positional-encoding-formula",
        assignment=B.name,
        reference=BLOCK,
        edits=(
            Edit(old="div_term = torch.exp(torch.arange(0, d_model, 2).float()",
                 new="div_term = torch.exp(torch.arange(0, d_model // 2).float()"),
        ),
        summary="the positional frequencies use exponent i/d instead of 2i/d",
        explanation=(
            "div_term is computed from arange(0, d_model // 2), i.e. exponent i/d instead "
            "of 2i/d. The shapes fit, so nothing crashes, but the frequencies only fall to "
            "about 1/100 instead of 1/10000 and the table is not the sinusoidal encoding. "
            "Use torch.arange(0, d_model, 2)."
        ),
        lesson="div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))",
    ),
    Mutant(
        id="block-causal-bias-symmetric",
        cause="causal-bias-symmetric",
        assignment=B.name,
        reference=BLOCK,
        edits=(
            Edit(old="""            # position i may attend to j <= i only: blank out the strict upper triangle
            future = torch.triu(torch.ones(seq_len, seq_len, dtype=torch.bool,
                                           device=x.device), diagonal=1)  # (seq, seq)
            scores = scores.masked_fill(future, float('-inf'))""",
                 new="""            # nearer tokens count more: a penalty that grows with the distance to the key
            pos = torch.arange(seq_len, device=x.device)
            distance = (pos[None, :] - pos[:, None]).abs()             # (seq, seq)
            scores = scores - distance"""),
        ),
        summary="the causal mask is replaced by a symmetric distance penalty -|i - j| (an ALiBi built with abs())",
        explanation=(
            "With the causal flag on, the scores get -|i - j| instead of -inf above the diagonal. A linear "
            "distance bias can carry causality (ALiBi) only when it is one-sided: -(i - j) for the keys at or "
            "before the query and -inf for the keys ahead. Built with abs() it penalises a key ahead exactly as "
            "much as the key as far behind, so every position still attends to the next tokens (the nearest "
            "one most), and a model trained this way reads the answer. Make the bias -inf for j > i, or keep "
            "the masked_fill of the strict upper triangle with -inf."
        ),
        lesson="position i can only attend to positions j <= i (set disallowed entries to -inf)",
    ),
)
# the block and reversal packs' mutants (harness/packs/{block,reversal}/pack.py name them: Pack.mutants)
BLOCK_MUTANTS: tuple[Mutant, ...] = tuple(m for m in MUTANTS if m.assignment == B.name)
REVERSAL_MUTANTS: tuple[Mutant, ...] = tuple(m for m in MUTANTS if m.assignment == R.name)


def get(mutant_id: str) -> Mutant:
    """The mutant with this id; KeyError naming close matches otherwise."""
    for mutant in MUTANTS:
        if mutant.id == mutant_id:
            return mutant
    close = difflib.get_close_matches(mutant_id, [m.id for m in MUTANTS], n=5, cutoff=0.5)
    hint = f"; did you mean: {', '.join(close)}" if close else ""
    raise KeyError(f"unknown mutant {mutant_id!r}{hint}")


def by_cause(cause: str, assignment: str | None = None) -> tuple[Mutant, ...]:
    """Mutants with this cause id (optionally of one assignment), in MUTANTS order."""
    return tuple(m for m in MUTANTS
                 if m.cause == cause and (assignment is None or m.assignment == assignment))


def by_assignment(assignment: str) -> tuple[Mutant, ...]:
    """Mutants of one single-file assignment (harness/assignments.py), in MUTANTS order."""
    return tuple(m for m in MUTANTS if m.assignment == assignment)


def causes(assignment: str | None = None) -> tuple[str, ...]:
    """The distinct cause ids, in order of first appearance."""
    seen: dict[str, None] = {}
    for m in MUTANTS:
        if assignment is None or m.assignment == assignment:
            seen.setdefault(m.cause)
    return tuple(seen)
