"""A vision transformer with a class token (issue 46): its encoder's output holds one row more than the patches, and
the classifier role's `attends-all` measures it (every row, the class token's too, must move when the last patch
changes) instead of skipping; a causal mask handed to such an encoder still fails it, with its form."""
from __future__ import annotations

from harness.child.probes.roles import RoleContext
from harness.child.probes.roles.classifier import attends_all
from harness.packs.cs231n import reference as ref_module
from harness.packs.cs231n.pack import PACK
from test_role_probes import KEY, _load, _resolve

REF = open(ref_module.__file__).read()
INIT = '''        self.head = nn.Linear(embed_dim, num_classes)
        self.apply(_init_small)
'''
FORWARD = '''        tokens = self.positional_encoding(self.patch_embed(x))
        pooled = self.transformer(tokens).mean(dim=1)
'''


def _with_class_token(mask: str = "") -> str:
    """The reference's VisionTransformer with a learned class token prepended and read out (our own edit)."""
    assert REF.count(INIT) == 1 and REF.count(FORWARD) == 1
    text = REF.replace(INIT, INIT + "        self.cls = nn.Parameter(torch.randn(1, 1, embed_dim))\n")
    text = text.replace("max_len=self.patch_embed.num_patches)", "max_len=self.patch_embed.num_patches + 1)")
    return text.replace(FORWARD, '''        patches = self.patch_embed(x)
        tokens = self.positional_encoding(torch.cat([self.cls.expand(len(x), -1, -1), patches], dim=1))
        pooled = self.transformer(tokens%s)[:, 0]
''' % mask)


def _attends_all(tmp_path, text: str) -> dict:
    b = PACK.binding("VisionTransformer")
    rctx = RoleContext(b, _resolve(_load(tmp_path, text), b.target), _resolve(ref_module, b.target), 0, "cpu", False,
                       {KEY: text})
    [c] = attends_all(rctx)
    return c


def test_a_class_token_is_measured_not_skipped(tmp_path):
    c = _attends_all(tmp_path, _with_class_token())
    assert c["status"] == "pass", c.get("detail")
    assert "class token" in c["expected"] and c["measured"] > 0


def test_a_causal_mask_before_a_class_token_still_fails(tmp_path):
    mask = ", src_mask=torch.tril(torch.ones(tokens.shape[1], tokens.shape[1]))"
    c = _attends_all(tmp_path, _with_class_token(mask))
    assert c["status"] == "fail"
    assert c["measured"]["tokens"] == 17 and 0 in c["measured"]["unmoved"]         # the class token's row too
    assert c["data"]["mechanism"]["kind"] == "masked" and c["data"]["mechanism"]["form"] == "causal"
