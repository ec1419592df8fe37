"""Our translation Transformer against HF's MarianMTModel, the peer the learning-parity benchmark
(benchmarks/translate_parity.py) trains: with the same weights the two compute the same logits, the
same label-smoothed loss per target token and the same gradients; a fresh model of ours starts from
the same weight scale as a fresh Marian (the scale the benchmark found decides how fast the small
preset learns); and the peer's recipe (DataCollatorForSeq2Seq over our ids) feeds its decoder what our
teacher forcing feeds ours."""
import os
import sys

import pytest
import torch

from bertlab.data.parallel import collate
from bertlab.models.transformer import Seq2SeqTransformer, TransformerConfig
from bertlab.translation.objective import step_loss_of

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))
transformers = pytest.importorskip("transformers")
from bench_translate import TeacherForcing, hf_loss, models  # noqa: E402

PAD, BOS, EOS = 0, 2, 3
pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: threads only add overhead


def config(**overrides):
    return TransformerConfig(**{"source_vocab_size": 40, "target_vocab_size": 40, "d_model": 32, "encoder_layers": 2,
                                "decoder_layers": 2, "attention_heads": 4, "ffn_dim": 64, "dropout": 0.0,
                                "max_position_embeddings": 64, "share_embeddings": True, **overrides})


def batch(seed=0, n=5):
    g = torch.Generator().manual_seed(seed)
    pairs = []
    for _ in range(n):
        src_len, tgt_len = (int(torch.randint(1, 9, (1,), generator=g)) for _ in range(2))
        pairs.append((torch.randint(4, 40, (src_len,), generator=g).tolist(),
                      torch.randint(4, 40, (tgt_len,), generator=g).tolist()))
    return collate(pairs, PAD, BOS, EOS)


def test_same_weights_same_logits_loss_and_gradients():
    ours, hf = models(config())
    b = batch()
    ours.eval(), hf.eval()
    real = b.tgt_out != PAD
    torch.testing.assert_close(ours(b.src, b.tgt_in)[real], TeacherForcing(hf)(b.src, b.tgt_in)[real],
                               rtol=1e-4, atol=1e-5)
    # label-smoothed cross-entropy per target token: our step loss and HF's LabelSmoother
    ours_loss = step_loss_of(PAD, 0.1, b.num_tokens, 1, "cpu")(ours, b)
    theirs_loss = hf_loss(hf, b, PAD, 0.1)
    torch.testing.assert_close(ours_loss, theirs_loss, rtol=1e-5, atol=1e-6)
    ours_loss.backward(), theirs_loss.backward()
    theirs = dict(hf.named_parameters(remove_duplicate=False))
    from bench_translate import marian_name
    for name, p in ours.named_parameters():
        if name == "output.weight":
            continue
        torch.testing.assert_close(p.grad, theirs[marian_name(name)].grad, rtol=1e-3, atol=1e-6, msg=name)


def test_fresh_weights_have_marians_scale():
    """Every matrix and table of a fresh model is N(0, init_std), as a fresh MarianMTModel's: the
    earlier fairseq start (Xavier matrices, N(0, d_model^-0.5) tables) was 2-3x larger and learned
    slower at the same rate (docs/results/translation-parity.md)."""
    from transformers import MarianMTModel
    from bench_translate import marian_config
    c = config(d_model=128, ffn_dim=256, source_vocab_size=2000, target_vocab_size=2000)
    torch.manual_seed(0)
    ours, hf = Seq2SeqTransformer(c), MarianMTModel(marian_config(c))
    for model in (ours, hf):
        for name, p in model.named_parameters():
            if p.dim() == 2 and p.requires_grad:  # not the fixed sinusoids
                std = float(p.detach()[p != 0].std())
                assert abs(std - c.init_std) < 0.05 * c.init_std, (type(model).__name__, name, std)
    assert torch.count_nonzero(ours.source_embedding.weight[PAD]) == 0


def test_peer_recipe_feeds_the_decoder_our_teacher_forcing():
    """translate_hf_trainer.py --batches sentences: DataCollatorForSeq2Seq over our ids gives Marian
    labels target + EOS, padding -100, and decoder inputs BOS + target: our tgt_out and tgt_in."""
    from transformers import DataCollatorForSeq2Seq, MarianMTModel
    from bench_translate import marian_config
    from bertlab.tokenization.subword import SubwordTokenizer
    from translate_hf_trainer import padding_tokenizer
    tokenizer = SubwordTokenizer.train(["ein kleiner Test", "a small test", "noch ein Satz hier"], 60, 1)
    c = config(source_vocab_size=len(tokenizer), target_vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_id,
               bos_token_id=tokenizer.bos_id, eos_token_id=tokenizer.eos_id)
    model = MarianMTModel(marian_config(c))
    pairs = [(tokenizer.encode("ein kleiner Test"), tokenizer.encode("a small test")),
             (tokenizer.encode("noch ein Satz"), tokenizer.encode("test"))]
    features = [{"input_ids": s + [tokenizer.eos_id], "labels": t + [tokenizer.eos_id]} for s, t in pairs]
    hf = DataCollatorForSeq2Seq(padding_tokenizer(tokenizer), model=model, label_pad_token_id=-100)(features)
    ours = collate(pairs, tokenizer.pad_id, tokenizer.bos_id, tokenizer.eos_id)
    assert hf["input_ids"].tolist() == ours.src.tolist()
    assert hf["labels"].tolist() == ours.tgt_out.masked_fill(ours.tgt_out == tokenizer.pad_id, -100).tolist()
    # at every scored position the same decoder input (after a short target HF's shift leaves its EOS
    # where ours pads: positions no label scores, and under the causal mask no scored one sees them)
    scored = hf["labels"] != -100
    assert hf["decoder_input_ids"][scored].tolist() == ours.tgt_in[scored].tolist()
