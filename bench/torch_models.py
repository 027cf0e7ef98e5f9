"""A model file (docs/model-format.md) as a PyTorch module, with its FLOPs.

bench/compare_pytorch.py trains the same network on both sides; this
module reads the model file's layers -- named values, `input:`/`inputs:`
references, blocks with parameters -- into a list of steps, tracks every
value's shape, counts the dense FLOPs (linear, conv2d, attention) of the
forward pass and the training step, and builds the nn.Module that computes
the same thing the way a PyTorch 1.13 user would write it (attention as
matmul, softmax, matmul: 1.13 has no fused scaled_dot_product_attention).

Only the layer kinds the bench models use are known; anything else is a
ValueError naming it.
"""

import math

PARAM_KINDS = ("linear", "conv2d", "batchnorm2d", "layernorm", "embedding")


def pair(v):
    return list(v) if isinstance(v, list) else [v, v]


def substitute(value, params):
    """A block body's $name replaced by the instance's argument."""
    if isinstance(value, str) and value.startswith("$"):
        return params[value[1:]]
    if isinstance(value, list):
        return [substitute(v, params) for v in value]
    if isinstance(value, dict):
        return {k: substitute(v, params) for k, v in value.items()}
    return value


class Step:
    """One layer: its kind, arguments, the values it reads and the one it makes."""

    def __init__(self, kind, args, inputs, output):
        self.kind, self.args, self.inputs, self.output = kind, args, inputs, output


class ModelGraph:
    def __init__(self, spec):
        self.spec = spec
        self.batch = spec["batch"]
        self.inputs = []  # (name, shape, dtype)
        for name, decl in spec["inputs"].items():
            shape = [self.batch if d == "B" else d for d in decl["shape"]]
            self.inputs.append((name, shape, decl.get("dtype", "f32")))
        self.steps = []
        self._auto = 0
        last = self.inputs[0][0]
        blocks = spec.get("blocks") or {}
        for item in spec["layers"]:
            ((kind, args),) = item.items()
            args = dict(args or {})
            if kind in blocks:
                last = self._expand_block(blocks[kind], args, last)
            else:
                last = self._add(kind, args, last, scope=None, block_in=None)
        ((loss_kind, loss_args),) = spec["loss"].items()
        self.loss = (loss_kind, loss_args["input"], loss_args["target"])
        self._infer()

    # --- Reading the layers ----------------------------------------------------------------

    def _name(self, kind, args, scope):
        name = args.pop("name", None)
        if name is None:
            name = f"{kind}_{self._auto}"
            self._auto += 1
        return f"{scope}.{name}" if scope else name

    def _add(self, kind, args, last, scope, block_in, inner=()):
        def resolve(ref):
            if block_in is not None and ref == "block_in":
                return block_in
            if scope and ref in inner:
                return f"{scope}.{ref}"
            return ref

        if "inputs" in args:
            inputs = [resolve(r) for r in args.pop("inputs")]
        elif "input" in args:
            inputs = [resolve(args.pop("input"))]
        else:
            inputs = [last]
        output = self._name(kind, args, scope)
        self.steps.append(Step(kind, args, inputs, output))
        return output

    def _expand_block(self, block, args, last):
        inst = args.pop("name", None) or f"block_{self._auto}"
        block_in = args.pop("input", last)
        params = {k: v for k, v in args.items()}
        inner = {(l[next(iter(l))] or {}).get("name") for l in block["layers"]}
        for item in block["layers"]:
            ((kind, iargs),) = item.items()
            iargs = substitute(dict(iargs or {}), params)
            last = self._add(kind, iargs, last, inst, block_in, inner)
        return last

    # --- Shapes and FLOPs ------------------------------------------------------------------

    def _infer(self):
        self.shapes = {name: list(shape) for name, shape, _ in self.inputs}
        data = {name for name, _, _ in self.inputs}
        self.forward_flops = 0
        self.train_flops = 0
        for s in self.steps:
            ins = [self.shapes[i] for i in s.inputs]
            shape, flops = self._shape_and_flops(s, ins)
            self.shapes[s.output] = shape
            if flops:
                self.forward_flops += flops
                # Backward: the weight gradient costs what the forward did,
                # and so does the input gradient -- except where the input
                # is the data, which needs none (neither side computes it).
                self.train_flops += flops * (2 if s.inputs[0] in data else 3)

    def _shape_and_flops(self, s, ins):
        kind, a, x = s.kind, s.args, ins[0]
        if kind == "linear":
            rows = math.prod(x[:-1])
            return x[:-1] + [a["out_features"]], 2 * rows * x[-1] * a["out_features"]
        if kind == "conv2d":
            n, c, h, w = x
            kh, kw = pair(a["kernel"])
            sh, sw = pair(a.get("stride", 1))
            ph, pw = pair(a.get("padding", 0))
            dh, dw = pair(a.get("dilation", 1))
            oc = a["out_channels"]
            oh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
            ow = (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1
            return [n, oc, oh, ow], 2 * n * oc * oh * ow * (c // a.get("groups", 1)) * kh * kw
        if kind == "scaled_dot_product_attention":
            q, k, v = ins
            heads = math.prod(q[:-2])
            sq, d, sk, dv = q[-2], q[-1], k[-2], v[-1]
            return q[:-1] + [dv], 2 * heads * sq * sk * (d + dv)
        if kind == "embedding":
            return x + [a["embedding_dim"]], 0
        if kind in ("relu", "gelu", "batchnorm2d", "layernorm", "dropout"):
            return x, 0
        if kind == "add":
            y = ins[1]
            rank = max(len(x), len(y))
            x1, y1 = [1] * (rank - len(x)) + x, [1] * (rank - len(y)) + y
            return [max(p, q) for p, q in zip(x1, y1)], 0
        if kind == "reshape":
            shape = [self.batch if d == "B" else d for d in a["shape"]]
            if -1 in shape:
                known = math.prod(d for d in shape if d != -1)
                shape[shape.index(-1)] = math.prod(x) // known
            return shape, 0
        if kind == "permute":
            return [x[d] for d in a["dims"]], 0
        if kind == "global_avgpool":
            return x[:2] + [1, 1], 0
        if kind == "flatten":
            start = a.get("start_dim", 1)
            return x[:start] + [math.prod(x[start:])], 0
        raise ValueError(f"compare_pytorch.py does not know layer kind '{kind}'")

    # --- PyTorch ---------------------------------------------------------------------------

    def torch_module(self):
        import torch
        import torch.nn as nn
        import torch.nn.functional as F

        graph = self

        class GraphNet(nn.Module):
            def __init__(self):
                super().__init__()
                self.mods = nn.ModuleDict()
                for s in graph.steps:
                    x = graph.shapes[s.inputs[0]]
                    key = s.output.replace(".", "_")
                    a = s.args
                    if s.kind == "linear":
                        self.mods[key] = nn.Linear(x[-1], a["out_features"], bias=a.get("bias", True))
                    elif s.kind == "conv2d":
                        self.mods[key] = nn.Conv2d(
                            x[1], a["out_channels"], pair(a["kernel"]),
                            stride=pair(a.get("stride", 1)), padding=pair(a.get("padding", 0)),
                            dilation=pair(a.get("dilation", 1)), groups=a.get("groups", 1),
                            bias=a.get("bias", True))
                    elif s.kind == "batchnorm2d":
                        self.mods[key] = nn.BatchNorm2d(x[1], eps=a.get("eps", 1e-5),
                                                        momentum=a.get("momentum", 0.1))
                    elif s.kind == "layernorm":
                        dims = a.get("normalized_dims", 1)
                        self.mods[key] = nn.LayerNorm(x[-dims:], eps=a.get("eps", 1e-5))
                    elif s.kind == "embedding":
                        self.mods[key] = nn.Embedding(a["num_embeddings"], a["embedding_dim"])

            def forward(self, inputs):
                values = dict(inputs)
                for s in graph.steps:
                    ins = [values[i] for i in s.inputs]
                    x, a, key = ins[0], s.args, s.output.replace(".", "_")
                    if s.kind in PARAM_KINDS:
                        y = self.mods[key](x)
                    elif s.kind == "relu":
                        y = F.relu(x)
                    elif s.kind == "gelu":
                        y = F.gelu(x, approximate=a.get("approximate", "none"))
                    elif s.kind == "dropout":
                        y = F.dropout(x, a.get("p", 0.5), training=self.training)
                    elif s.kind == "add":
                        y = x + ins[1]
                    elif s.kind == "reshape":
                        y = x.reshape(graph.shapes[s.output])
                    elif s.kind == "permute":
                        y = x.permute(*a["dims"])
                    elif s.kind == "scaled_dot_product_attention":
                        q, k, v = ins
                        scale = a.get("scale", 0) or 1 / math.sqrt(q.shape[-1])
                        scores = torch.matmul(q, k.transpose(-2, -1)) * scale
                        if a.get("causal", False):
                            n = scores.shape[-1]
                            mask = torch.ones(n, n, dtype=torch.bool).triu(1)
                            scores = scores.masked_fill(mask, float("-inf"))
                        y = torch.matmul(torch.softmax(scores, dim=-1), v)
                    elif s.kind == "global_avgpool":
                        y = F.adaptive_avg_pool2d(x, 1)
                    elif s.kind == "flatten":
                        y = torch.flatten(x, a.get("start_dim", 1), a.get("end_dim", -1))
                    else:
                        raise ValueError(f"no PyTorch translation of '{s.kind}'")
                    values[s.output] = y
                return values[graph.loss[1]]

        return GraphNet()

    def torch_inputs(self):
        """Random data for every input but the loss's target, and the target."""
        import torch

        vocab = {}
        for s in self.steps:
            if s.kind == "embedding":
                vocab[s.inputs[0]] = s.args["num_embeddings"]
        loss_kind, loss_input, target = self.loss
        inputs, y = {}, None
        for name, shape, dtype in self.inputs:
            integral = dtype in ("i64", "i32")
            if name == target:
                if integral:
                    y = torch.randint(0, self.shapes[loss_input][-1], shape)
                else:
                    y = torch.randn(shape)
            elif integral:
                inputs[name] = torch.randint(0, vocab.get(name, 2), shape)
            else:
                inputs[name] = torch.randn(shape)
        return inputs, y, self.loss_target_integral()

    def loss_target_integral(self):
        return next(d for n, _, d in self.inputs if n == self.loss[2]) in ("i64", "i32")

    def torch_loss(self):
        import torch.nn as nn

        return {"mse_loss": nn.MSELoss, "cross_entropy": nn.CrossEntropyLoss}[self.loss[0]]()

    def torch_optimizer(self, params):
        import torch

        ((kind, args),) = self.spec["optimizer"].items()
        if kind == "sgd":
            return torch.optim.SGD(params, lr=args["lr"], momentum=args.get("momentum", 0.0))
        if kind == "adam":
            return torch.optim.Adam(params, lr=args["lr"])
        raise ValueError(f"compare_pytorch.py does not know optimizer '{kind}'")
