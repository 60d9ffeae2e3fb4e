"""Memory from first principles (notebooks `memory`, `batch_size`, `latency_throughput`, `checkpoints` and
`estimating_a_job`): bytes of state per parameter for each training recipe and what a checkpoint of it saves, a
transformer's training memory, a decoder's KV cache, and whether it fits a GPU. Pure arithmetic;
:mod:`labkit.instruments.memory` measures, and re-exports these.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core import checks
from ..core.result import Result


@dataclass(frozen=True)
class StateBytes(Result):
    """Bytes per parameter held as state (not activations) by a precision/optimizer recipe."""

    parameters: float
    gradients: float
    optimizer: float

    @property
    def total(self) -> float:
        return self.parameters + self.gradients + self.optimizer


# Bytes per parameter. Mixed precision comes in three layouts, 16 or 18 bytes of state (plain fp32 Adam holds 16:
# mixed precision saves activation memory and time, not state):
# - "mixed adam": the model's own weights and gradients are bf16/fp16 and the optimizer keeps an fp32 master copy
#   beside its fp32 moments, 2 + 2 + 4 + 4 + 4 (Rajbhandari et al., 2020, section 3.1; Megatron-LM's
#   Float16OptimizerWithFloat16Params, DeepSpeed ZeRO's fp32 partitions, labkit's MixedPrecisionAdam);
# - "mixed adam, fp32 grads": as "mixed adam", but the gradients are accumulated and reduced in an fp32 buffer,
#   2 + 4 + 12 = 18: Megatron-LM's layout for bf16 training (it reduces gradients in fp32 unless given
#   --grad-reduce-in-bf16). Its distributed optimizer (ZeRO-1) shards the 12 bytes of fp32 main parameters and
#   moments over the d data-parallel ranks: 6 + 12/d (Megatron-LM's docs/source/api-guide/dist_optimizer.md, the
#   row "float16 param, fp32 grads");
# - "mixed adam, fp32 params": the model's own (sharded) weights stay fp32 and serve as the master copy; 16-bit
#   copies exist only while a layer computes, and its gradients come back in fp32: 4 + 4 + 8. PyTorch's FSDP2
#   (``fully_shard`` with ``MixedPrecisionPolicy(param_dtype=torch.bfloat16)``: "the optimizer step uses the sharded
#   parameter in the original dtype", torch/distributed/fsdp/_fully_shard/_fsdp_api.py).
# int8 ignores the small per-channel scales.
RECIPES: dict[str, StateBytes] = {
    "fp32 inference": StateBytes(4, 0, 0),
    "bf16 inference": StateBytes(2, 0, 0),
    "fp16 inference": StateBytes(2, 0, 0),
    "int8 inference": StateBytes(1, 0, 0),
    "fp32 sgd": StateBytes(4, 4, 0),
    "fp32 sgd-momentum": StateBytes(4, 4, 4),
    "fp32 adam": StateBytes(4, 4, 8),
    "mixed adam": StateBytes(2, 2, 12),
    "mixed adam, fp32 grads": StateBytes(2, 4, 12),
    "mixed adam, fp32 params": StateBytes(4, 4, 8),
}


def bytes_per_parameter(recipe: str) -> StateBytes:
    """State bytes per parameter for a recipe such as ``"fp32 adam"`` (:data:`RECIPES` says where each comes from).

    Notebooks `inference_vs_training` and `memory` reach it through state_bytes, notebook `checkpoints` through
    checkpoint_bytes_per_parameter.
    """
    if not isinstance(recipe, str):
        raise TypeError(f"recipe must be a string, one of: {', '.join(RECIPES)}; got {recipe!r}")
    key = recipe.strip().lower()
    if key not in RECIPES:
        raise ValueError(f"unknown recipe {recipe!r}; allowed: {', '.join(RECIPES)}")
    return RECIPES[key]


def checkpoint_bytes_per_parameter(recipe: str) -> float:
    """Bytes per parameter that a checkpoint saves to resume training: the weights as the model holds them and the
    optimizer's state. Gradients are not saved (the next step computes them afresh). Taught in notebook `checkpoints`.

    - ``"fp32 adam"``: 4 + 8 = 12;
    - ``"mixed adam"`` (and ``"mixed adam, fp32 grads"``), a 16-bit model beside an fp32 master copy: the model's 2
      plus the optimizer's master copy and two moments, 4 + 4 + 4, so 14. Megatron-LM saves the model's 16-bit
      weights and the state of its ``Float16OptimizerWithFloat16Params`` (``fp32_from_fp16_params`` and Adam's
      moments); DeepSpeed ZeRO stages 1 and 2 save the 16-bit module beside each rank's fp32 partition of master
      weights and moments;
    - ``"mixed adam, fp32 params"``, PyTorch's FSDP2 with a ``MixedPrecisionPolicy``: the fp32 sharded parameters are
      the model's own and the master copy at once (bf16 only for compute), so 4 + 4 + 4 = 12. DeepSpeed ZeRO-3
      saves about as much: its module's 16-bit parameters are partitioned, so the saved module state holds empty
      tensors (deepspeedai/DeepSpeed#2413), and ``zero_to_fp32.py`` rebuilds the weights from the fp32 partitions.
    """
    per = bytes_per_parameter(recipe)
    return per.parameters + per.optimizer


def state_bytes(n_params: int, recipe: str, n_trainable: int | None = None) -> dict[str, int]:
    """Predicted parameter, gradient and optimizer bytes for a model of ``n_params`` parameters.

    Taught in notebook `inference_vs_training`.

    Gradients and optimizer state exist only for trainable parameters (``n_trainable``, default
    all of them): that is why fine-tuning a head is so much lighter than full training.
    """
    per = bytes_per_parameter(recipe)
    checks.amount("n_params", n_params)
    n_trainable = n_params if n_trainable is None else n_trainable
    if checks.amount("n_trainable", n_trainable) > n_params:
        raise ValueError(f"n_trainable ({n_trainable}) cannot exceed n_params ({n_params})")
    return dict(
        parameters=int(per.parameters * n_params),
        gradients=int(per.gradients * n_trainable),
        optimizer=int(per.optimizer * n_trainable),
    )


@dataclass(frozen=True)
class ParallelLayout(Result):
    """How a training job is split over GPUs: ``data`` × ``tensor`` × ``pipeline`` GPUs, and the ZeRO stage of
    the data-parallel dimension (Rajbhandari et al., 2020, "ZeRO: Memory Optimizations Toward Training Trillion
    Parameter Models", arXiv:1910.02054). Taught in notebook `memory`; notebook `estimating_a_job`'s estimate takes one.

    - ``tensor`` and ``pipeline`` split the model itself: each GPU holds 1/(tensor·pipeline) of the parameters and
      of their gradients and optimizer state (Megatron-LM's layers split across GPUs, and consecutive layers as
      pipeline stages);
    - ``zero`` shards what is left across the ``data`` replicas: 0 keeps a full copy on each (DDP), 1 shards the
      optimizer state, 2 also the gradients, 3 also the parameters (PyTorch's FSDP ``FULL_SHARD`` is stage 3,
      ``SHARD_GRAD_OP`` stage 2's traffic, though it also shards the parameters between steps);
    - ``sequence_parallel`` (with ``tensor`` > 1): whether the activations outside the tensor-parallel matmuls are
      sharded too (Megatron-LM's ``--sequence-parallel``; :func:`estimate_transformer_training` says what it
      changes).
    """

    data: int = 1
    tensor: int = 1
    pipeline: int = 1
    zero: int = 0
    sequence_parallel: bool = True

    def __post_init__(self):
        for name in ("data", "tensor", "pipeline"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a positive integer (a number of GPUs), got {value!r}")
        if self.zero not in (0, 1, 2, 3):
            raise ValueError(f"zero must be a ZeRO stage: 0 (none, DDP), 1, 2 or 3; got {self.zero!r}")

    @property
    def gpus(self) -> int:
        return self.data * self.tensor * self.pipeline

    def __str__(self) -> str:
        sp = "" if self.tensor == 1 or self.sequence_parallel else " (no sequence parallelism)"
        return f"{self.gpus} GPUs: data {self.data} (ZeRO-{self.zero}) x tensor {self.tensor}{sp} x pipeline {self.pipeline}"


def sharded_state_bytes(n_params: float, recipe: str, layout: ParallelLayout) -> dict[str, float]:
    """Parameter, gradient and optimizer bytes **per GPU** under ``layout`` (notebook `memory`'s calculator, `estimating_a_job`'s estimate).

    Taught in notebook `memory`. Tensor and pipeline parallelism divide all three by tensor·pipeline; ZeRO stage 1, 2, 3
    then divides the optimizer state, the gradients, the parameters by the data degree (Rajbhandari et al., 2020,
    section 5: with mixed-precision Adam, 16 bytes per parameter become 4 + 12/N at stage 1, 2 + 14/N at stage 2,
    16/N at stage 3; with Megatron-LM's fp32 gradients, ``"mixed adam, fp32 grads"``, stage 1 is its distributed
    optimizer's 6 + 12/N). Layers that every tensor-parallel rank repeats (layer norms, biases of row-parallel layers)
    are a rounding error and are left out.
    """
    per = bytes_per_parameter(recipe)
    model_share = n_params / (layout.tensor * layout.pipeline)
    shard = {"optimizer": 1, "gradients": 2, "parameters": 3}
    return {
        kind: getattr(per, kind) * model_share / (layout.data if layout.zero >= stage else 1)
        for kind, stage in shard.items()
    }


# Activations per token and layer that tensor parallelism alone leaves whole on every rank: the inputs of the two
# layer norms and of the two column-parallel blocks (q/k/v and the MLP's first layer), which every rank needs in
# full. Korthikanti et al., 2022 (arXiv:2205.05198), eq. 2: 10 of a layer's 34·s·b·h bytes stay unsplit without
# sequence parallelism; 4 of those are dropout masks (1 byte a value), which labkit's TinyGPT does not have.
TP_REPLICATED_VALUES = 4.0

USABLE_FRACTION = 0.9  # the rest goes to the CUDA context, the allocator's cache and fragmentation


def estimate_transformer_training(
    n_params: int,
    recipe: str = "fp32 adam",
    batch: int = 1,
    seq_len: int = 512,
    d_model: int = 512,
    n_layers: int = 8,
    vocab: int = 256,
    saved_per_token_layer: float = 18.0,
    activation_bytes: int | None = None,
    layout: ParallelLayout | None = None,
) -> dict[str, int]:
    """First-principles training memory of a GPT-style model, by category, in bytes (notebook `memory`); with a
    ``layout``, per GPU.

    - state: ``bytes_per_parameter(recipe)`` × ``n_params``;
    - activations: ``saved_per_token_layer`` × d_model values kept per token per layer for the
      backward pass (about 18 for labkit's TinyGPT: layer norms, q/k/v, attention output, the 4×
      MLP's two wide tensors, residuals; notebook `memory` calibrates it), plus the logits and their
      softmax (2 × vocab values per token);
    - ``activation_bytes``: bytes per activation value; by default 4, or 2 for a recipe whose
      name starts with "mixed", "bf16" or "fp16";
    - ``layout`` (:class:`ParallelLayout`): the state is :func:`sharded_state_bytes`; ``batch`` is then each data
      replica's micro-batch, and its activations are divided by the tensor degree when the layout uses sequence
      parallelism (Megatron-LM then shards them all: Korthikanti et al., 2022, arXiv:2205.05198, section 4.2.2);
      without it :data:`TP_REPLICATED_VALUES` of them per token and layer stay whole on every rank. They are not
      divided by the pipeline degree: under the 1F1B schedule the first stage keeps ``pipeline`` micro-batches in
      flight, each through 1/``pipeline`` of the layers, which is one micro-batch through all of them (the same paper, section 4.2.3).
    """
    sizes = dict(n_params=n_params, batch=batch, seq_len=seq_len, d_model=d_model, n_layers=n_layers, vocab=vocab)
    bad = {k: v for k, v in sizes.items() if not isinstance(v, int) or isinstance(v, bool) or v < 1}
    if bad:
        raise ValueError(f"sizes must be positive integers; got {bad}")
    if saved_per_token_layer <= 0:
        raise ValueError(f"saved_per_token_layer must be positive, got {saved_per_token_layer}")
    if layout is None:
        state = state_bytes(n_params, recipe)
    else:
        state = {kind: round(value) for kind, value in sharded_state_bytes(n_params, recipe, layout).items()}
    if activation_bytes is None:
        activation_bytes = 2 if recipe.strip().lower().split()[0] in ("mixed", "bf16", "fp16") else 4
    tokens = batch * seq_len
    t = layout.tensor if layout is not None else 1
    per_layer = saved_per_token_layer / t  # values per token and layer on each rank
    if layout is not None and t > 1 and not layout.sequence_parallel:
        replicated = min(TP_REPLICATED_VALUES, saved_per_token_layer)
        per_layer = replicated + (saved_per_token_layer - replicated) / t
    # the logits are split by a vocabulary-parallel output layer either way
    activations = int(tokens * (per_layer * d_model * n_layers + 2 * vocab / t) * activation_bytes)
    return dict(**state, activations=activations, total=sum(state.values()) + activations)


def fits_on(total_bytes: int, gpu_gib: float, usable_fraction: float = USABLE_FRACTION) -> bool:
    """Whether ``total_bytes`` fit in a GPU of ``gpu_gib`` GiB (2**30 bytes), keeping headroom. Taught in notebook `memory`.

    GPU memory is binary: an "80 GB" H100 holds 80 GiB (:data:`labkit.predict.specs.GPU_MEMORY_GIB` says why).
    """
    checks.amount("total_bytes", total_bytes)
    checks.positive("gpu_gib", gpu_gib)
    checks.fraction("usable_fraction", usable_fraction)
    return total_bytes <= usable_fraction * gpu_gib * 2**30


def kv_cache_bytes(
    n_layers: int, kv_heads: int, head_dim: int, tokens: int, batch: int = 1, bytes_per_value: int = 2
) -> int:
    """Bytes of a decoder's KV cache: a key and a value vector per layer, key/value head and token, per sequence.

    Taught in notebook `latency_throughput`. ``2 · n_layers · kv_heads · head_dim · tokens · batch · bytes_per_value``. Every decode
    step reads all of it (each new token attends to every cached one), so at long contexts or large batches it
    outweighs the weights. Models with grouped-query attention share ``kv_heads`` key/value heads among more query
    heads (Llama 2 70B: 8 for 64), which shrinks the cache by that factor.
    """
    for name, value in dict(n_layers=n_layers, kv_heads=kv_heads, head_dim=head_dim, tokens=tokens, batch=batch,
                            bytes_per_value=bytes_per_value).items():  # fmt: skip
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return 2 * n_layers * kv_heads * head_dim * tokens * batch * bytes_per_value
