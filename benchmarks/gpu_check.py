"""On a CUDA machine: bertlab's BERT against HF's on the GPU, and what bf16 costs in accuracy.

    python benchmarks/gpu_check.py

Uses a randomly initialised BERT-base (HF) copied into bertlab, fp32 with TF32 off, then bf16
autocast; prints max-abs differences. Needs no downloads.
"""
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
import torch  # noqa: E402

from bertlab import BertConfig, BertModel  # noqa: E402
from bertlab.interop import load_state_dict_strict  # noqa: E402


@torch.inference_mode()
def main():
    if not torch.cuda.is_available():
        sys.exit("no CUDA device")
    import transformers
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(0)
    hf = transformers.BertModel(transformers.BertConfig()).eval().cuda()
    ours = BertModel(BertConfig(), init_weights=False)
    load_state_dict_strict(ours, {k: v.cpu() for k, v in hf.state_dict().items()})
    ours = ours.eval().cuda()
    ids = torch.randint(1000, 30000, (16, 128), device="cuda")
    mask = torch.ones_like(ids)
    for row in range(16):
        mask[row, 8 * row + 8:] = 0
    ref = hf(input_ids=ids, attention_mask=mask, token_type_ids=torch.zeros_like(ids))
    got = ours(ids, attention_mask=mask)
    real = mask.bool()
    print(f"{torch.cuda.get_device_name()} torch {torch.__version__}")
    print(f"BERT-base fp32 on GPU: max |ours - HF| sequence {(got.sequence_output - ref.last_hidden_state)[real].abs().max():.2e}"
          f", pooled {(got.pooled_output - ref.pooler_output).abs().max():.2e}")
    with torch.autocast("cuda", dtype=torch.bfloat16):
        low = ours(ids, attention_mask=mask)
    print(f"BERT-base bf16 autocast vs fp32: max |diff| sequence "
          f"{(low.sequence_output.float() - got.sequence_output)[real].abs().max():.2e}")


if __name__ == "__main__":
    main()
