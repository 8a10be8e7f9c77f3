"""Settings of the token-budget bucketing pipeline."""

import dataclasses

from keras_transformer.utils.dataclass_config import DataclassConfig, setting


@dataclasses.dataclass(frozen=True)
class PipelineConfig(DataclassConfig):
    """How `make_translation_dataset` batches a tokenized parallel corpus.

    Defaults follow the paper (5.1): batches of sentence pairs of similar
    length with about 25,000 source and 25,000 target tokens, counted here
    as padded tokens per replica (`batch x padded length <= token_budget`).
    """

    token_budget: int = setting(
        25000,
        "Padded tokens per side per replica in one batch (paper 5.1: about 25,000).",
    )
    max_length: int = setting(
        256,
        "Longest sequence kept, special tokens included; also the last bucket boundary. Longer "
        "pairs are dropped and counted in the summary.",
    )
    min_bucket_length: int = setting(8, "Padded length of the first (shortest) bucket.")
    bucket_growth: float = setting(
        1.05,
        "Ratio between consecutive bucket boundaries (at least +1 token per step). Smaller "
        "ratios pad less but give more shapes (one XLA compile each): 1.05 pads Multi30k to "
        "about 92-95% real tokens, 1.1 to about 89-92%.",
    )
    length_multiple: int = setting(
        1,
        "Round every boundary up to a multiple of this (8 suits GPU tensor cores).",
    )
    num_replicas: int = setting(
        1,
        "Replicas the global batch is split over (`strategy.num_replicas_in_sync`); batch sizes "
        "are multiples of it and the budget holds per replica.",
    )
    num_processes: int = setting(
        1,
        "JAX multi-process training (`keras.distribution.initialize()`, one process per host): "
        "the number of processes. Every process builds the same global batches and yields its "
        "own consecutive `1 / num_processes` of each one's rows, as "
        "`DataParallel(auto_shard_dataset=False)` expects. Leave it and process_index at their "
        "defaults for tf.distribute, which shards by itself.",
    )
    process_index: int = setting(
        0,
        "JAX multi-process training: this process's index (`jax.process_index()`); see "
        "num_processes.",
    )
    accumulation_steps: int = setting(
        1,
        "Batches whose gradients are accumulated into one update (the optimizer's "
        "`accumulation_steps`). Above 1, the dataset also yields per-token weights `k / (real "
        'target tokens in the k batches)` for a loss with reduction="sum", so the update is the '
        "token-weighted mean over all k.",
    )
    shuffle: bool = setting(
        True,
        "Shuffle pair order every epoch (from `seed` and the epoch number).",
    )
    seed: int = setting(
        0,
        "Seed of the shuffle; the same seed gives the same batches in the same order.",
    )
    repeat: bool = setting(
        True,
        "Repeat epochs forever (pass `steps_per_epoch` to `fit`); False gives one epoch.",
    )
    prefetch: bool = setting(True, "Prefetch batches in the background (`tf.data.AUTOTUNE`).")
    add_source_eos: bool = setting(
        True,
        "End every source with EOS, as tensor2tensor and fairseq do.",
    )
    pad_id: int = setting(
        0,
        "Padding id; the defaults match `SubwordTokenizer` (pad 0, begin 2, end 3). An imported "
        "model's tokenizer may have others (fairseq: pad 1, begin 0, end 2; Marian: begin = "
        "pad).",
    )
    bos_id: int = setting(
        2,
        "Begin-of-sentence id: the decoder's first input (SubwordTokenizer: 2; Marian: the "
        "padding id; fairseq: the end id).",
    )
    eos_id: int = setting(3, "End-of-sentence id (SubwordTokenizer: 3; fairseq: 2; Marian: 0).")

    def __post_init__(self):
        self.check_types()
        for name in (
            "token_budget",
            "max_length",
            "min_bucket_length",
            "length_multiple",
            "num_replicas",
            "num_processes",
            "accumulation_steps",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"`{name}` must be a positive int. Received: {name}={value!r}")
        if self.num_replicas % self.num_processes:
            raise ValueError(
                "`num_replicas` (devices over all processes) must be a multiple of "
                f"`num_processes`. Received: num_replicas={self.num_replicas}, "
                f"num_processes={self.num_processes}"
            )
        index = self.process_index
        if isinstance(index, bool) or not isinstance(index, int):
            index = None
        if index is None or not 0 <= index < self.num_processes:
            raise ValueError(
                f"`process_index` must be an int in [0, {self.num_processes}) "
                f"(num_processes={self.num_processes}). Received: "
                f"process_index={self.process_index!r}"
            )
        if not self.bucket_growth > 1.0:
            raise ValueError(
                f"`bucket_growth` must be > 1. Received: bucket_growth={self.bucket_growth!r}"
            )
        if self.min_bucket_length > self.max_length:
            raise ValueError(
                "`min_bucket_length` must not exceed `max_length`. Received: "
                f"min_bucket_length={self.min_bucket_length}, max_length={self.max_length}"
            )
        if self.max_length % self.length_multiple:
            raise ValueError(
                "`max_length` must be a multiple of `length_multiple`. Received: "
                f"max_length={self.max_length}, length_multiple={self.length_multiple}"
            )
        if self.token_budget < self.max_length:
            raise ValueError(
                "`token_budget` must hold at least one sequence of `max_length`. Received: "
                f"token_budget={self.token_budget}, max_length={self.max_length}"
            )
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"`seed` must be a non-negative int. Received: seed={self.seed!r}")
        ids = {"pad_id": self.pad_id, "bos_id": self.bos_id, "eos_id": self.eos_id}
        # The decoder's first input may be the padding id (Marian's models start from it) or
        # the end id (fairseq's); an end id equal to the padding id would be ignored by the loss.
        if self.eos_id == self.pad_id or min(ids.values()) < 0:
            raise ValueError(
                "`pad_id`, `bos_id`, `eos_id` must be ids >= 0, `eos_id` differing from "
                "`pad_id` (`bos_id` may equal either: Marian's models start decoding from the "
                f"padding id, fairseq's from the end id). Received: {ids}"
            )
