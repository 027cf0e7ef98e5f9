"""The real-models zoo: the architectures users bring, written as PyTorch
users write them, with small inputs.

Each entry builds a torch.nn.Module (random weights, seeded), its example
inputs and what its training needs (labels and the loss). check_zoo.py
exports each with torch.onnx.export and checks ampc against PyTorch.

A model's family picks the CI subset: one model per family runs by default,
the whole zoo under `ctest -C long`.
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Entry:
    """One zoo model.

    inputs: {name: tensor} in the forward's argument order.
    loss: "cross_entropy" over [B, C] logits, "lm" (cross entropy over
      [B, T, V] logits against [B, T] tokens), "mse" (against a target of
      the output's shape) or "seg" (per-pixel cross entropy, [B, C, H, W]).
    dropout: the model has dropout (its training steps are random).
    """

    def __init__(self, name, family, build, inputs, loss, classes, dropout=False,
                 ci=False, train=True):
        self.name = name
        self.family = family
        self.build = build
        self.inputs = inputs
        self.loss = loss
        self.classes = classes
        self.dropout = dropout
        self.ci = ci
        self.train = train


def _image(batch=8, size=64, channels=3):
    g = torch.Generator().manual_seed(1)
    return {"input": torch.randn(batch, channels, size, size, generator=g)}


def _tokens(batch, seq, vocab):
    g = torch.Generator().manual_seed(2)
    return torch.randint(0, vocab, (batch, seq), generator=g)


# --- Language models written the usual way ---------------------------------

class CausalSelfAttention(nn.Module):
    """nanoGPT's attention: a causal mask buffer and masked_fill."""

    def __init__(self, dim, heads, block):
        super().__init__()
        self.c_attn = nn.Linear(dim, 3 * dim)
        self.c_proj = nn.Linear(dim, dim)
        self.heads = heads
        self.register_buffer("bias", torch.tril(torch.ones(block, block)).view(1, 1, block, block))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        k = k.view(B, T, self.heads, C // self.heads).transpose(1, 2)
        q = q.view(B, T, self.heads, C // self.heads).transpose(1, 2)
        v = v.view(B, T, self.heads, C // self.heads).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class GptBlock(nn.Module):
    def __init__(self, dim, heads, block):
        super().__init__()
        self.ln_1 = nn.LayerNorm(dim)
        self.attn = CausalSelfAttention(dim, heads, block)
        self.ln_2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class NanoGpt(nn.Module):
    def __init__(self, vocab=64, block=32, dim=48, heads=4, layers=2):
        super().__init__()
        self.wte = nn.Embedding(vocab, dim)
        self.wpe = nn.Embedding(block, dim)
        self.h = nn.ModuleList([GptBlock(dim, heads, block) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(dim)
        self.lm_head = nn.Linear(dim, vocab, bias=False)

    def forward(self, idx):
        b, t = idx.size()
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device).unsqueeze(0)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x))


class BertEncoder(nn.Module):
    """A BERT-style encoder: token + position + segment embeddings, a
    padding mask from the attention_mask input, nn.TransformerEncoder."""

    def __init__(self, vocab=64, seq=16, dim=32, heads=4, layers=2, classes=3):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(seq, dim)
        self.norm = nn.LayerNorm(dim)
        layer = nn.TransformerEncoderLayer(dim, heads, 4 * dim, dropout=0.0, activation="gelu",
                                           batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(dim, classes)

    def forward(self, input_ids, attention_mask):
        t = input_ids.size(1)
        pos = torch.arange(t, device=input_ids.device).unsqueeze(0)
        x = self.norm(self.tok(input_ids) + self.pos(pos))
        x = self.encoder(x, src_key_padding_mask=attention_mask == 0)
        return self.head(x[:, 0])


class TextCnn(nn.Module):
    """Kim's sentence CNN: embedding, Conv1d of three widths, max over time."""

    def __init__(self, vocab=64, dim=16, filters=8, classes=4):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.convs = nn.ModuleList([nn.Conv1d(dim, filters, k, padding=k // 2) for k in (3, 4, 5)])
        self.fc = nn.Linear(3 * filters, classes)

    def forward(self, tokens):
        x = self.embed(tokens).transpose(1, 2)
        pooled = [F.relu(c(x)).max(dim=2).values for c in self.convs]
        return self.fc(torch.cat(pooled, 1))


class UNetLike(nn.Module):
    """A small U-Net: GroupNorm, strided convs down, ConvTranspose and an
    upsample back up, skip connections by concatenation."""

    def __init__(self, channels=3, width=8, classes=2):
        super().__init__()

        def block(cin, cout):
            return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.GroupNorm(2, cout),
                                 nn.SiLU())

        self.down1 = block(channels, width)
        self.down2 = nn.Sequential(nn.Conv2d(width, 2 * width, 3, stride=2, padding=1),
                                   nn.GroupNorm(4, 2 * width), nn.SiLU())
        self.down3 = nn.Sequential(nn.Conv2d(2 * width, 4 * width, 3, stride=2, padding=1),
                                   nn.GroupNorm(4, 4 * width), nn.SiLU())
        self.up2 = nn.ConvTranspose2d(4 * width, 2 * width, 2, stride=2)
        self.dec2 = block(4 * width, 2 * width)
        self.dec1 = block(3 * width, width)
        self.out = nn.Conv2d(width, classes, 1)

    def forward(self, x):
        d1 = self.down1(x)
        d2 = self.down2(d1)
        d3 = self.down3(d2)
        u2 = self.dec2(torch.cat([self.up2(d3), d2], 1))
        u1 = F.interpolate(u2, scale_factor=2.0, mode="nearest")
        return self.out(self.dec1(torch.cat([u1, d1], 1)))


class Seq2SeqTransformer(nn.Module):
    """nn.Transformer (encoder-decoder) over embedded tokens."""

    def __init__(self, vocab=32, dim=32, heads=4, seq=8):
        super().__init__()
        self.src = nn.Embedding(vocab, dim)
        self.tgt = nn.Embedding(vocab, dim)
        self.transformer = nn.Transformer(dim, heads, 2, 2, 64, dropout=0.0, batch_first=True)
        self.out = nn.Linear(dim, vocab)
        self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(seq))

    def forward(self, src, tgt):
        y = self.transformer(self.src(src), self.tgt(tgt), tgt_mask=self.mask)
        return self.out(y)


class SegWrapper(nn.Module):
    """torchvision's segmentation models return a dict; the zoo takes 'out'."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x):
        return self.model(x)["out"]


def quiet_randomness(module):
    """Dropout and stochastic depth at 0: both sides compute one function."""
    from torchvision.ops import StochasticDepth

    for m in module.modules():
        if isinstance(m, (nn.Dropout, nn.Dropout2d, nn.AlphaDropout)):
            m.p = 0.0
        elif isinstance(m, StochasticDepth):
            m.p = 0.0
        elif isinstance(m, nn.MultiheadAttention):
            m.dropout = 0.0


# --- The zoo ----------------------------------------------------------------

def _tv(name, **kw):
    def build():
        import torchvision.models as tvm
        return getattr(tvm, name)(weights=None, **kw)
    return build


def _seg(name, **kw):
    def build():
        import torchvision.models.segmentation as seg
        return SegWrapper(getattr(seg, name)(weights=None, weights_backbone=None, **kw))
    return build


def _bert_inputs():
    ids = _tokens(2, 16, 64)
    mask = torch.ones(2, 16, dtype=torch.long)
    mask[1, 11:] = 0
    return {"input_ids": ids, "attention_mask": mask}


def zoo():
    img = _image()
    entries = [
        # torchvision classification (family: cnn, mobile, vit, ...)
        Entry("resnet18", "resnet", _tv("resnet18"), img, "cross_entropy", 1000, ci=True),
        Entry("resnet34", "resnet", _tv("resnet34"), img, "cross_entropy", 1000),
        Entry("resnet50", "resnet", _tv("resnet50"), img, "cross_entropy", 1000),
        Entry("resnext50_32x4d", "resnet", _tv("resnext50_32x4d"), img, "cross_entropy", 1000),
        Entry("wide_resnet50_2", "resnet", _tv("wide_resnet50_2"), img, "cross_entropy", 1000),
        # AlexNet and VGG pool their features to 6x6 and 7x7: torch exports
        # that only where the features divide evenly, so 224x224.
        Entry("alexnet", "vgg", _tv("alexnet"), _image(batch=2, size=224), "cross_entropy", 1000,
              dropout=True),
        Entry("vgg11_bn", "vgg", _tv("vgg11_bn"), _image(batch=2, size=224), "cross_entropy",
              1000, dropout=True),
        Entry("squeezenet1_0", "vgg", _tv("squeezenet1_0"), img, "cross_entropy", 1000,
              dropout=True),
        Entry("squeezenet1_1", "vgg", _tv("squeezenet1_1"), img, "cross_entropy", 1000,
              dropout=True, ci=True),
        Entry("densenet121", "densenet", _tv("densenet121"), img, "cross_entropy", 1000, ci=True),
        Entry("googlenet", "inception", _tv("googlenet", aux_logits=False, init_weights=False),
              img, "cross_entropy", 1000, dropout=True, ci=True),
        Entry("inception_v3", "inception",
              _tv("inception_v3", aux_logits=False, init_weights=False),
              _image(size=80), "cross_entropy", 1000, dropout=True),
        Entry("mobilenet_v2", "mobile", _tv("mobilenet_v2"), img, "cross_entropy", 1000,
              dropout=True),
        Entry("mobilenet_v3_small", "mobile", _tv("mobilenet_v3_small"), img, "cross_entropy",
              1000, dropout=True, ci=True),
        Entry("mobilenet_v3_large", "mobile", _tv("mobilenet_v3_large"), img, "cross_entropy",
              1000, dropout=True),
        Entry("shufflenet_v2_x0_5", "mobile", _tv("shufflenet_v2_x0_5"), img, "cross_entropy",
              1000),
        Entry("shufflenet_v2_x1_0", "mobile", _tv("shufflenet_v2_x1_0"), img, "cross_entropy",
              1000),
        Entry("mnasnet1_0", "mobile", _tv("mnasnet1_0"), img, "cross_entropy", 1000,
              dropout=True),
        Entry("mnasnet0_5", "mobile", _tv("mnasnet0_5"), img, "cross_entropy", 1000,
              dropout=True),
        Entry("efficientnet_b0", "efficientnet", _tv("efficientnet_b0"), img, "cross_entropy",
              1000, dropout=True),
        Entry("efficientnet_v2_s", "efficientnet", _tv("efficientnet_v2_s"), img,
              "cross_entropy", 1000, dropout=True),
        Entry("regnet_x_400mf", "regnet", _tv("regnet_x_400mf"), img, "cross_entropy", 1000),
        Entry("regnet_y_400mf", "regnet", _tv("regnet_y_400mf"), img, "cross_entropy", 1000),
        Entry("convnext_tiny", "convnext", _tv("convnext_tiny"), img, "cross_entropy", 1000),
        Entry("vit_b_32", "vit", _tv("vit_b_32", image_size=64), _image(batch=2),
              "cross_entropy", 1000),
        Entry("swin_t", "vit", _tv("swin_t"), _image(batch=2), "cross_entropy", 1000, ci=True),
        Entry("maxvit_t", "vit", _tv("maxvit_t"), _image(batch=2, size=224), "cross_entropy",
              1000, dropout=True),
        # segmentation
        Entry("fcn_resnet50", "segmentation", _seg("fcn_resnet50", aux_loss=False),
              _image(batch=4), "seg", 21),
        Entry("lraspp_mobilenet_v3_large", "segmentation", _seg("lraspp_mobilenet_v3_large"),
              img, "seg", 21, ci=True),
        # written the usual way
        Entry("transformer", "transformer", Seq2SeqTransformer,
              {"src": _tokens(2, 8, 32), "tgt": _tokens(2, 8, 32)}, "lm", 32),
        Entry("nanogpt", "transformer", NanoGpt, {"idx": _tokens(2, 16, 64)}, "lm", 64, ci=True),
        Entry("bert", "transformer", BertEncoder, _bert_inputs(), "cross_entropy", 3, ci=True),
        Entry("textcnn", "text", TextCnn, {"tokens": _tokens(2, 20, 64)}, "cross_entropy", 4,
              ci=True),
        Entry("unet", "unet", UNetLike, _image(batch=4, size=32), "seg", 2, ci=True),
    ]
    return entries
