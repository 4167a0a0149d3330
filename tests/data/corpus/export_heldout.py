"""The held-out sweep: tiny Hugging Face models of architectures that tests/data/corpus does not
hold, exported by export_corpus.py's own machinery into OUT/<arch>/ in the corpus's layout, then
measured by measure.py like the corpus (docs/results/correctness.md, "Held-out architectures"). Nothing here is
committed but this script: the sweep checks that fbl generalizes past the models it was built on.

    $HOME/venv-export/bin/python tests/data/corpus/export_heldout.py OUT [ARCH,...]
    FBL_CORPUS=OUT $HOME/venv-export/bin/python tests/data/corpus/measure.py build OUT/measure.json
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import export_corpus as C  # noqa: E402
from export_corpus import ids, NO_DROPOUT, SEQ  # noqa: E402,F401
import torch  # noqa: E402
import transformers as T  # noqa: E402

DEC = ["noopt", "opt"]  # bart, whisper: dynamo fails on LayerDrop (as opt in the corpus); ts added
LLAMA_T = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
LLAMA_KW = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, vocab_size=128, max_position_embeddings=64, use_cache=False,
                pad_token_id=0, bos_token_id=1, eos_token_id=2)


def lm(cls, c, targets, notes, styles=DEC):
    x = ids(c.vocab_size)
    return (cls, c, targets, ["input_ids", "labels"], (x, x.clone()), styles, notes)


def mistral():
    c = T.MistralConfig(sliding_window=4, head_dim=8, **LLAMA_KW, **NO_DROPOUT)
    return lm(T.MistralForCausalLM, c, LLAMA_T, "GQA 4/2, sliding window 4")


def qwen2():
    c = T.Qwen2Config(**LLAMA_KW, **NO_DROPOUT)
    return lm(T.Qwen2ForCausalLM, c, LLAMA_T, "qkv bias, GQA 4/2")


def gemma():
    c = T.GemmaConfig(head_dim=8, **LLAMA_KW, **NO_DROPOUT)
    return lm(T.GemmaForCausalLM, c, LLAMA_T, "GeGLU, (1+w) RMSNorm, embedding scaled by sqrt(hidden)")


def gemma2():
    c = T.Gemma2Config(head_dim=8, query_pre_attn_scalar=8, sliding_window=4, final_logit_softcapping=30.0,
                       attn_logit_softcapping=50.0, **LLAMA_KW, **NO_DROPOUT)
    return lm(T.Gemma2ForCausalLM, c, LLAMA_T, "tied head with a final softcap, attention softcap, sliding window 4")


def stablelm():
    c = T.StableLmConfig(partial_rotary_factor=0.25, use_qkv_bias=True, hidden_dropout=0.0, **LLAMA_KW,
                         **NO_DROPOUT)
    return lm(T.StableLmForCausalLM, c, LLAMA_T, "LayerNorm, partial rotary 0.25, qkv bias")


def phi():
    kw = dict(LLAMA_KW)
    kw.pop("num_key_value_heads")
    c = T.PhiConfig(partial_rotary_factor=0.5, resid_pdrop=0.0, embd_pdrop=0.0, **kw, **NO_DROPOUT)
    return lm(T.PhiForCausalLM, c, ["q_proj", "k_proj", "v_proj", "dense", "fc1", "fc2"],
              "phi-2: parallel attn+MLP, partial rotary 0.5, gelu_new")


def starcoder2():
    c = T.Starcoder2Config(sliding_window=4, residual_dropout=0.0, embedding_dropout=0.0, **LLAMA_KW,
                           **NO_DROPOUT)
    return lm(T.Starcoder2ForCausalLM, c, ["q_proj", "k_proj", "v_proj", "o_proj", "c_fc", "c_proj"],
              "LayerNorm, bias, GQA, sliding window 4, gelu MLP")


def gpt_bigcode():
    c = T.GPTBigCodeConfig(n_embd=32, n_layer=2, n_head=4, n_inner=64, vocab_size=128, n_positions=32,
                           multi_query=True, bos_token_id=1, eos_token_id=2, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, use_cache=False)
    return lm(T.GPTBigCodeForCausalLM, c, ["c_attn", "c_proj", "c_fc"], "multi-query fused c_attn (nn.Linear)")


def bloom():
    c = T.BloomConfig(hidden_size=32, n_layer=2, n_head=4, vocab_size=128, hidden_dropout=0.0,
                      attention_dropout=0.0, use_cache=False, bos_token_id=1, eos_token_id=2, pad_token_id=0)
    return lm(T.BloomForCausalLM, c, ["query_key_value", "dense", "dense_h_to_4h", "dense_4h_to_h"],
              "ALiBi, embedding LayerNorm")


def mpt():
    c = T.MptConfig(d_model=32, n_heads=4, n_layers=2, expansion_ratio=2, vocab_size=128, max_seq_len=64,
                    resid_pdrop=0.0, emb_pdrop=0.0, use_cache=False,
                    attn_config=dict(attn_pdrop=0, alibi=True))
    return lm(T.MptForCausalLM, c, ["Wqkv", "out_proj", "up_proj", "down_proj"], "ALiBi, fused Wqkv, no bias")


def olmo():
    c = T.OlmoConfig(**LLAMA_KW, **NO_DROPOUT)
    return lm(T.OlmoForCausalLM, c, LLAMA_T, "non-parametric LayerNorm")


def mlm(cls, c, targets, notes, pad, styles=("noopt", "opt", "ts"), extra=False):
    x = ids(c.vocab_size, 2)
    mask = torch.ones_like(x)
    mask[1, 11:] = 0
    x[mask == 0] = pad
    labels = ids(c.vocab_size, 2)
    labels[mask == 0] = -100
    return (cls, c, targets, ["input_ids", "attention_mask", "labels"], (x, mask, labels), list(styles), notes)


BERT_KW = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, vocab_size=128,
               hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
BERT_T = ["query", "key", "value", "attention.output.dense", "intermediate.dense", "output.dense"]


def distilbert():
    c = T.DistilBertConfig(dim=32, hidden_dim=64, n_layers=2, n_heads=4, vocab_size=128, max_position_embeddings=64,
                           dropout=0.0, attention_dropout=0.0, qa_dropout=0.0, seq_classif_dropout=0.0, pad_token_id=0)
    return mlm(T.DistilBertForMaskedLM, c, ["q_lin", "k_lin", "v_lin", "out_lin", "lin1", "lin2"],
               "no token types, padded mask", 0)


def albert():
    c = T.AlbertConfig(embedding_size=16, max_position_embeddings=64, num_hidden_groups=1, pad_token_id=0,
                       classifier_dropout_prob=0.0, **BERT_KW)
    return mlm(T.AlbertForMaskedLM, c, ["query", "key", "value", "attention.dense", "ffn", "ffn_output"],
               "one shared layer group used twice, factorised embedding 16->32", 0)


def electra():
    c = T.ElectraConfig(embedding_size=16, max_position_embeddings=64, pad_token_id=0, **BERT_KW)
    return mlm(T.ElectraForMaskedLM, c, BERT_T, "generator MLM, embedding projection 16->32", 0)


def xlm_roberta():
    c = T.XLMRobertaConfig(max_position_embeddings=SEQ + 2, type_vocab_size=1, pad_token_id=1, **BERT_KW)
    return mlm(T.XLMRobertaForMaskedLM, c, BERT_T, "as roberta (CumSum positions)", 1)


def bart():
    c = T.BartConfig(d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                     decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, vocab_size=128,
                     max_position_embeddings=64, dropout=0.0, attention_dropout=0.0, activation_dropout=0.0,
                     encoder_layerdrop=0.0, decoder_layerdrop=0.0, use_cache=False, pad_token_id=1,
                     bos_token_id=0, eos_token_id=2, decoder_start_token_id=2)
    src, tgt = ids(c.vocab_size, 2), ids(c.vocab_size, 2)
    return (T.BartForConditionalGeneration, c, ["q_proj", "k_proj", "v_proj", "out_proj", "fc1", "fc2"],
            ["input_ids", "labels"], (src, tgt), DEC + ["ts"], "encoder-decoder, learned positions offset 2, shift right")


def image(cls, c, targets, notes, styles=("noopt", "opt", "ts")):
    return (cls, c, targets, ["pixel_values", "labels"], (torch.randn(2, 3, 16, 16), torch.randint(0, 10, (2,))),
            list(styles), notes)


VIT_T = ["q_proj", "k_proj", "v_proj", "o_proj", "fc1", "fc2"]  # transformers 5 names


def vit():
    c = T.ViTConfig(image_size=16, patch_size=4, num_labels=10, **{k: v for k, v in BERT_KW.items()
                                                                   if k != "vocab_size"})
    return image(T.ViTForImageClassification, c, VIT_T, "cls token, Conv patches")


def clip_vision():
    vc = T.CLIPVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                            image_size=16, patch_size=4, attention_dropout=0.0, projection_dim=16)
    tc = T.CLIPTextConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=4,
                          vocab_size=128, max_position_embeddings=16, projection_dim=16)
    c = T.CLIPConfig(vision_config=vc.to_dict(), text_config=tc.to_dict(), projection_dim=16, num_labels=10)
    return image(T.CLIPForImageClassification, c, ["q_proj", "k_proj", "v_proj", "out_proj", "fc1", "fc2"],
                 "CLIP vision tower + linear head (pre-LN, quick_gelu, class embedding)")


def whisper():
    c = T.WhisperConfig(vocab_size=128, num_mel_bins=16, d_model=32, encoder_layers=2, decoder_layers=2,
                        encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64,
                        max_source_positions=16, max_target_positions=32, dropout=0.0, attention_dropout=0.0,
                        activation_dropout=0.0, encoder_layerdrop=0.0, decoder_layerdrop=0.0, use_cache=False,
                        pad_token_id=0, bos_token_id=1, eos_token_id=2, decoder_start_token_id=1,
                        begin_suppress_tokens=None, suppress_tokens=None)
    feats = torch.randn(2, 16, 32)  # mel bins 16, 32 frames -> 16 positions after the stride-2 conv
    labels = ids(c.vocab_size, 2)
    return (T.WhisperForConditionalGeneration, c, ["q_proj", "k_proj", "v_proj", "out_proj", "fc1", "fc2"],
            ["input_features", "labels"], (feats, labels), DEC + ["ts"], "audio enc-dec: Conv1d stem, sinusoidal enc positions")


def qwen2_seqcls():
    c = T.Qwen2Config(num_labels=3, **LLAMA_KW, **NO_DROPOUT)
    x, mask, _ = C.padded_batch(c.vocab_size, c.pad_token_id, "right")
    return (T.Qwen2ForSequenceClassification, c, ["q_proj", "v_proj"], ["input_ids", "attention_mask", "labels"],
            (x, mask, torch.randint(0, 3, (3,))), DEC, "decoder SEQ_CLS: the last real token found by ArgMax",
            dict(task_type="SEQ_CLS"))


def mistral_left():
    c = T.MistralConfig(sliding_window=4, head_dim=8, **LLAMA_KW, **NO_DROPOUT)
    return (T.MistralForCausalLM, c, LLAMA_T[:4], ["input_ids", "attention_mask", "labels"],
            C.padded_batch(c.vocab_size, c.pad_token_id, "left"), DEC, "sliding window 4 on a left-padded batch")


def wav2vec2_seqcls():
    return C.wav2vec2("layer", True, DEC + ["ts"],
                      "audio: 1-D Conv feature encoder with LayerNorm, grouped positional Conv, SEQ_CLS head")


def moe(cls, cfg_cls, notes, **kw):
    c = cfg_cls(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                vocab_size=128, max_position_embeddings=64, num_experts_per_tok=2, use_cache=False, pad_token_id=0,
                bos_token_id=1, eos_token_id=2, **kw, **NO_DROPOUT)
    c._experts_implementation = "batched_mm"  # the exportable experts (export_corpus.py, mixtral)
    return lm(cls, c, LLAMA_T[:4], notes)


def qwen2_moe():
    return moe(T.Qwen2MoeForCausalLM, T.Qwen2MoeConfig, "MoE: top-2 of 4 experts plus a sigmoid-gated shared expert",
               num_experts=4, moe_intermediate_size=32, shared_expert_intermediate_size=64, decoder_sparse_step=1)


def olmoe():
    return moe(T.OlmoeForCausalLM, T.OlmoeConfig, "MoE: top-2 of 4 experts, no renormalization, q/k norms",
               num_experts=4)


def mixtral_experts():
    _, c, *_ = moe(T.MixtralForCausalLM, T.MixtralConfig, "", num_local_experts=4)
    return lm(T.MixtralForCausalLM, c, ["q_proj", "v_proj"], "MoE: LoRA on the experts' weights (peft target_parameters)",
              ) + (dict(target_parameters=["experts.gate_up_proj", "experts.down_proj"]),)


def mobilevit():
    c = T.MobileViTConfig(image_size=32, patch_size=2, hidden_sizes=[16, 24, 32], neck_hidden_sizes=[8, 8, 16, 16, 24, 24, 32],
                          num_attention_heads=2, mlp_ratio=2.0, num_labels=10, hidden_dropout_prob=0.0,
                          attention_probs_dropout_prob=0.0, classifier_dropout_prob=0.0)
    return (T.MobileViTForImageClassification, c, ["query", "key", "value"], ["pixel_values", "labels"],
            (torch.randn(2, 3, 32, 32), torch.randint(0, 10, (2,))), ["noopt", "opt", "ts"],
            "MobileViT: BatchNorm CNN blocks in train mode around unfolded-patch transformers",
            dict(modules_to_save=["classifier"]))


def cnn(cls, c, targets, notes):
    return (cls, c, targets, ["pixel_values", "labels"], (torch.randn(4, 3, 32, 32), torch.randint(0, 10, (4,))),
            ["noopt", "opt", "ts"], notes, dict(modules_to_save=["classifier"]))


def mobilenet_v2():
    # tf_padding reads the Conv's stride, which peft's LoRA Conv2d wrapper does not have.
    c = T.MobileNetV2Config(image_size=32, depth_multiplier=0.25, num_labels=10, tf_padding=False,
                            classifier_dropout_prob=0.0)
    return cnn(T.MobileNetV2ForImageClassification, c,
               r".*(first_conv|expand_1x1|reduce_1x1|conv_1x1)\.convolution",
               "MobileNetV2: depthwise Convs, BatchNorm in train mode, ReLU6; LoRA on the 1x1 Convs (peft refuses a "
               "depthwise one at rank 8)")


def efficientnet():
    c = T.EfficientNetConfig(image_size=32, width_coefficient=0.25, depth_coefficient=0.25, num_labels=10, hidden_dim=320,
                             dropout_rate=0.0, drop_connect_rate=0.0)
    return cnn(T.EfficientNetForImageClassification, c, ["expand_conv", "project_conv"],
               "EfficientNet: depthwise Convs, squeeze-excite, SiLU, BatchNorm in train mode")


def regnet():
    c = T.RegNetConfig(embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1], groups_width=4, num_labels=10)
    return cnn(T.RegNetForImageClassification, c, ["convolution"], "RegNet: grouped Convs, squeeze-excite, BatchNorm in train mode")


def resnet_bottleneck():
    c = T.ResNetConfig(embedding_size=8, hidden_sizes=[16, 32], depths=[1, 1], layer_type="bottleneck", num_labels=10)
    return cnn(T.ResNetForImageClassification, c, ["convolution"], "ResNet-50's bottleneck blocks, BatchNorm in train mode")


NEW = dict(mistral=mistral, qwen2=qwen2, gemma=gemma, gemma2=gemma2, stablelm=stablelm, phi=phi, starcoder2=starcoder2,
           gpt_bigcode=gpt_bigcode, bloom=bloom, mpt=mpt, olmo=olmo, distilbert=distilbert, albert=albert,
           electra=electra, xlm_roberta=xlm_roberta, bart=bart, vit=vit, clip_vision=clip_vision, whisper=whisper,
           qwen2_seqcls=qwen2_seqcls, mistral_left=mistral_left, wav2vec2_seqcls=wav2vec2_seqcls,
           mobilevit=mobilevit, qwen2_moe=qwen2_moe, olmoe=olmoe, mixtral_experts=mixtral_experts,
           mobilenet_v2=mobilenet_v2, efficientnet=efficientnet, regnet=regnet, resnet_bottleneck=resnet_bottleneck)


if __name__ == "__main__":
    C.main(NEW)
