"""A MoE model's architecture as config.json gives it, and the parameter and KV-cache counts derived from it.

ktinfra.catalog builds these from the catalog and from local config.json files; ktinfra.sizing turns them
into bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class MLA:
    """Multi-head latent attention (DeepSeek-V2/V3, Kimi-K2)."""

    q_lora_rank: int | None
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int


@dataclass(frozen=True)
class SparseIndexer:
    """DeepSeek-V3.2's lightning indexer (DSA): scores past tokens so attention reads only index_topk."""

    heads: int
    head_dim: int
    topk: int

    def params_per_layer(self, hidden: int, q_lora_rank: int | None) -> int:
        """wq_b from the compressed query, wk, and weights_proj (one weight per indexer head)."""
        query = q_lora_rank or hidden
        return query * self.heads * self.head_dim + hidden * self.head_dim + hidden * self.heads


@dataclass(frozen=True)
class LinearAttention:
    """Gated DeltaNet layers (Qwen3-Next) or Kimi Delta Attention layers (Kimi-Linear, `kda`): a fixed-size
    recurrent state per request, no KV cache."""

    num_layers: int
    key_heads: int
    value_heads: int
    key_head_dim: int
    value_head_dim: int
    conv_kernel: int
    kda: bool = False

    def params_per_layer(self, hidden: int) -> int:
        """Gated DeltaNet: in_proj_qkvz (q, k, v and the gate z), in_proj_ba (two per value head), the
        depthwise convolution over q, k and v, and out_proj. KDA (sglang-kt's kimi_linear.py
        KimiDeltaAttention): q, k, v and o projections, the low-rank forget gate and output gate
        (f_a/g_a hidden -> head_dim, f_b/g_b head_dim -> heads x head_dim), b_proj (one per head) and the
        three convolutions."""
        k = self.key_heads * self.key_head_dim
        v = self.value_heads * self.value_head_dim
        if self.kda:
            d = self.value_head_dim
            gates = 2 * (hidden * d + d * v) + hidden * self.value_heads
            return hidden * (2 * k + v) + v * hidden + gates + self.conv_kernel * (2 * k + v)
        return (
            hidden * (2 * k + 2 * v)
            + hidden * 2 * self.value_heads
            + self.conv_kernel * (2 * k + v)
            + v * hidden
        )

    def state_elements_per_layer(self) -> tuple[int, int]:
        """(convolution window, recurrent matrix) elements one request keeps per layer: the last
        conv_kernel - 1 inputs of the q, k and v convolution, and a key-dim x value-dim matrix per value
        head (SGLang's Mamba2StateShape for Qwen3-Next; KimiLinearStateShape is the same with key and value
        heads equal)."""
        conv = (2 * self.key_heads * self.key_head_dim + self.value_heads * self.value_head_dim) * (
            self.conv_kernel - 1
        )
        return conv, self.value_heads * self.value_head_dim * self.key_head_dim


@dataclass(frozen=True)
class VisionEncoder:
    """The Qwen3-VL / Qwen3.5 vision tower (a ViT whose patch merger maps 2x2 patches into the language
    model's width; Qwen3-VL adds one merger per deepstack layer). SGLang and LLaMA-Factory keep it on the
    GPU in bf16, unquantized."""

    depth: int
    hidden_size: int
    intermediate_size: int
    in_channels: int
    patch_size: int
    temporal_patch_size: int
    spatial_merge_size: int
    out_hidden_size: int
    num_position_embeddings: int
    deepstack_mergers: int

    @property
    def params(self) -> int:
        """Weights, biases and LayerNorms: unlike the language model's count this one is exact, since
        biases are a larger share of a ViT (molecule envs compares it with transformers' tower)."""
        h, inner = self.hidden_size, self.intermediate_size
        patch_embed = self.in_channels * self.temporal_patch_size * self.patch_size**2 * h + h
        # two LayerNorms, qkv and proj, the two-matrix MLP
        block = 2 * 2 * h + (3 * h * h + 3 * h) + (h * h + h) + (2 * h * inner + inner + h)
        merged = h * self.spatial_merge_size**2

        def merger(norm_width: int) -> int:
            """A LayerNorm, then merged -> merged -> the language model's width (biases included)."""
            return 2 * norm_width + (merged + 1) * merged + (merged + 1) * self.out_hidden_size

        deepstack = self.deepstack_mergers * merger(merged)  # normalized after the 2x2 shuffle
        return patch_embed + self.num_position_embeddings * h + self.depth * block + merger(h) + deepstack


@dataclass(frozen=True)
class Architecture:
    name: str
    hf_repo: str | None
    path: str | None
    model_type: str
    hidden_size: int
    num_layers: int
    num_dense_layers: int  # layers with a plain MLP instead of an MoE block
    dense_intermediate_size: int
    moe_intermediate_size: int
    num_experts: int
    experts_per_token: int
    shared_intermediate_size: int  # all shared experts of one MoE layer together (0 = none)
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    mla: MLA | None
    vocab_size: int
    tie_word_embeddings: bool
    max_position_embeddings: int | None
    native_dtype: str  # "bf16" | "fp8" | "int4" (the dtype of the published checkpoint's linear weights)
    quant_group_size: int | None = None  # int4 checkpoints: weights per scale (compressed-tensors group)
    fp8_block_n: int | None = None  # block-quantized fp8 checkpoints: output rows per scale block
    fp8_block_k: int | None = None  # and input columns per scale block
    num_mtp_layers: int = 0
    mtp_own_embeddings: bool = True  # DeepSeek's MTP layer ships its own embedding and output head
    linear_attention: LinearAttention | None = None
    indexer: SparseIndexer | None = None
    attention_output_gate: bool = False  # q_proj also yields a sigmoid gate per head (Qwen3-Next)
    vision: VisionEncoder | None = None
    encoders: tuple[str, ...] = ()  # config.json sections of a multimodal wrapper that are not sized
    gguf_repo: str | None = None
    template: str | None = None
    legacy_sft_rules: dict = field(default_factory=dict)

    @property
    def num_moe_layers(self) -> int:
        return self.num_layers - self.num_dense_layers

    @property
    def num_kv_layers(self) -> int:
        """Layers with softmax attention and so a KV cache."""
        return self.num_layers - (self.linear_attention.num_layers if self.linear_attention else 0)

    # -- parameter counts (weights only; norms and biases are < 0.1% and left out) --
    @property
    def expert_params(self) -> int:
        """One routed expert: gate, up and down projections."""
        return 3 * self.hidden_size * self.moe_intermediate_size

    @property
    def routed_expert_params(self) -> int:
        return self.expert_params * self.num_experts * self.num_moe_layers

    @property
    def attention_params_per_layer(self) -> int:
        h = self.hidden_size
        heads = self.num_attention_heads
        if self.mla:
            m = self.mla
            qk = m.qk_nope_head_dim + m.qk_rope_head_dim
            q = h * heads * qk if m.q_lora_rank is None else h * m.q_lora_rank + m.q_lora_rank * heads * qk
            kv_a = h * (m.kv_lora_rank + m.qk_rope_head_dim)
            kv_b = m.kv_lora_rank * heads * (m.qk_nope_head_dim + m.v_head_dim)
            indexer = self.indexer.params_per_layer(h, m.q_lora_rank) if self.indexer else 0
            return q + kv_a + kv_b + heads * m.v_head_dim * h + indexer
        d = self.head_dim
        q = h * heads * d * (2 if self.attention_output_gate else 1)
        return q + 2 * h * self.num_kv_heads * d + heads * d * h

    @property
    def attention_params(self) -> int:
        """Every layer's attention: softmax attention, and the linear attention of hybrid models."""
        linear = self.linear_attention
        mixers = linear.params_per_layer(self.hidden_size) * linear.num_layers if linear else 0
        return self.attention_params_per_layer * self.num_kv_layers + mixers

    @property
    def dense_mlp_params(self) -> int:
        return 3 * self.hidden_size * self.dense_intermediate_size * self.num_dense_layers

    @property
    def shared_expert_params(self) -> int:
        return 3 * self.hidden_size * self.shared_intermediate_size * self.num_moe_layers

    @property
    def router_params(self) -> int:
        return self.hidden_size * self.num_experts * self.num_moe_layers

    @property
    def embedding_params(self) -> int:
        return self.vocab_size * self.hidden_size

    @property
    def lm_head_params(self) -> int:
        return 0 if self.tie_word_embeddings else self.vocab_size * self.hidden_size

    @property
    def non_expert_params(self) -> int:
        """Everything SGLang/LLaMA-Factory keep on the GPU: attention, dense MLPs, shared experts, routers,
        embeddings and the LM head."""
        return (
            self.attention_params
            + self.dense_mlp_params
            + self.shared_expert_params
            + self.router_params
            + self.embedding_params
            + self.lm_head_params
        )

    @property
    def mtp_params(self) -> int:
        """Multi-token-prediction layers (DeepSeek-V3, Qwen3.5): shipped in the checkpoint, unused by KT
        serving; DeepSeek's carry their own copies of the embedding and output head."""
        per_layer = (
            self.attention_params_per_layer
            + self.expert_params * self.num_experts
            + 3 * self.hidden_size * self.shared_intermediate_size
            + self.hidden_size * self.num_experts
            + 2 * self.hidden_size * self.hidden_size
        )
        return self.num_mtp_layers * per_layer + self.mtp_embedding_params

    @property
    def mtp_embedding_params(self) -> int:
        """The MTP layers' own embedding and output-head copies (in mtp_params; 0 where they use the main
        model's): FP8 checkpoints keep them in bf16 like the main ones (DeepSeek-V3's layers.61.embed_tokens
        and shared_head.head)."""
        if not self.mtp_own_embeddings:
            return 0
        return self.num_mtp_layers * 2 * self.vocab_size * self.hidden_size

    @property
    def encoder_params(self) -> int:
        """The sized vision encoder (0 without one); not in total_params, which counts the language model."""
        return self.vision.params if self.vision else 0

    @property
    def total_params(self) -> int:
        return self.non_expert_params + self.routed_expert_params

    @property
    def active_params(self) -> int:
        return self.non_expert_params + self.expert_params * self.experts_per_token * self.num_moe_layers

    @property
    def kv_elements_per_token(self) -> int:
        """KV-cache elements one token occupies across all layers (MLA caches the compressed latent)."""
        if self.mla:
            per_layer = self.mla.kv_lora_rank + self.mla.qk_rope_head_dim
        else:
            per_layer = 2 * self.num_kv_heads * self.head_dim
        return per_layer * self.num_kv_layers

    @property
    def attention_activation_width(self) -> int:
        """Per-token width of q, k, v and the attention output of one layer (MLA decompressed)."""
        heads = self.num_attention_heads
        if self.mla:
            qk = self.mla.qk_nope_head_dim + self.mla.qk_rope_head_dim
            return heads * (2 * qk + 2 * self.mla.v_head_dim)
        return 2 * heads * self.head_dim + 2 * self.num_kv_heads * self.head_dim

    def summary(self) -> dict:
        return {
            "name": self.name,
            "hf_repo": self.hf_repo,
            "path": self.path,
            "architecture": self.model_type,
            "total_params": self.total_params,
            "encoder_params": self.encoder_params,
            "active_params": self.active_params,
            "num_experts": self.num_experts,
            "experts_per_token": self.experts_per_token,
            "num_layers": self.num_layers,
            "num_moe_layers": self.num_moe_layers,
            "native_dtype": self.native_dtype,
        }
