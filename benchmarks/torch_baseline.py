"""A plain PyTorch Transformer of a `TransformerConfig`'s size: the torch baseline of
`training_throughput.py --baseline torch`.

`torch.nn.Transformer` (post-LN, batch first, no final LayerNorm after either stack, as the
paper), one embedding tied between source, target and the pre-softmax projection with its
outputs scaled by sqrt(d_model), sinusoidal positions (sin and cos interleaved), the loss
`F.cross_entropy(label_smoothing=0.1, ignore_index=pad)` (mean over real tokens, as ours),
`torch.optim.Adam` (0.9, 0.98, 1e-9; torch's default implementation) with the paper's schedule.
torch's attention has biases and applies `dropout` to the attention weights, as the
benchmark's default configuration of ours (`attention_bias=True`, `attention_dropout=dropout`).
"""

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn


def sinusoidal_positions(length, d_model):
    """(length, d_model): sin at even and cos at odd features (paper 3.5)."""
    positions = np.arange(length)[:, None]
    rates = 1.0 / 10000 ** (2 * (np.arange(d_model) // 2) / d_model)
    angles = positions * rates[None, :]
    table = np.where(np.arange(d_model) % 2 == 0, np.sin(angles), np.cos(angles))
    return torch.tensor(table, dtype=torch.float32)


class TorchTransformer(nn.Module):
    """The benchmark's baseline with a Keras-like `train_on_batch(inputs, labels)`."""

    def __init__(self, config, dtype="float32", max_length=1024):
        super().__init__()
        d = config.d_model
        self.config = config
        self.embedding = nn.Embedding(config.vocabulary_size, d)
        nn.init.normal_(self.embedding.weight, std=d**-0.5)
        self.register_buffer("positions", sinusoidal_positions(max_length, d), persistent=False)

        def stack(layer_class, stack_class, **layer_args):
            layer = layer_class(
                d, config.num_heads, config.intermediate_dim, config.dropout,
                activation="relu", batch_first=True, norm_first=False,
                layer_norm_eps=config.layer_norm_epsilon,
            )  # fmt: skip
            return stack_class(layer, config.num_layers, norm=None, **layer_args)

        self.transformer = nn.Transformer(
            d_model=d,
            nhead=config.num_heads,
            batch_first=True,
            custom_encoder=stack(
                nn.TransformerEncoderLayer, nn.TransformerEncoder, enable_nested_tensor=False
            ),
            custom_decoder=stack(nn.TransformerDecoderLayer, nn.TransformerDecoder),
        )
        self.dropout = nn.Dropout(config.dropout)
        self.autocast = dtype == "bfloat16"
        self.optimizer = torch.optim.Adam(self.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
        warmup = 4000

        def rate(step):
            step = step + 1
            return d**-0.5 * min(step**-0.5, step * warmup**-1.5)

        self.schedule = torch.optim.lr_scheduler.LambdaLR(self.optimizer, rate)
        # Where Keras' torch backend puts ours: the GPU when there is one.
        self.device = "cuda" if torch.cuda.is_available() else "cpu"
        self.to(self.device)

    def embed(self, ids):
        sequence = self.embedding(ids) * math.sqrt(self.config.d_model)
        return self.dropout(sequence + self.positions[: ids.shape[1]])

    def forward(self, encoder_ids, decoder_ids):
        pad = self.config.pad_id
        target_length = decoder_ids.shape[1]
        causal = nn.Transformer.generate_square_subsequent_mask(target_length, device=self.device)
        outputs = self.transformer(
            self.embed(encoder_ids),
            self.embed(decoder_ids),
            tgt_mask=causal,
            src_key_padding_mask=encoder_ids == pad,
            tgt_key_padding_mask=decoder_ids == pad,
            memory_key_padding_mask=encoder_ids == pad,
            tgt_is_causal=True,
        )  # (batch, target_length, d_model)
        return outputs @ self.embedding.weight.T  # (batch, target_length, vocabulary)

    def train_on_batch(self, inputs, labels):
        self.train()

        def tensor(array):
            return torch.as_tensor(array, dtype=torch.long, device=self.device)

        encoder_ids = tensor(inputs["encoder_token_ids"])
        decoder_ids = tensor(inputs["decoder_token_ids"])
        labels = tensor(labels)
        with torch.autocast(self.device, dtype=torch.bfloat16, enabled=self.autocast):
            logits = self(encoder_ids, decoder_ids)
        loss = F.cross_entropy(
            logits.float().reshape(-1, logits.shape[-1]),
            labels.reshape(-1),
            label_smoothing=0.1,
            ignore_index=self.config.pad_id,
        )
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        self.schedule.step()
        return float(loss.detach())

    def count_params(self):
        return sum(p.numel() for p in self.parameters())
