"""What the commands that run a trained model share (embed, similar, extract-features, fill-mask,
attention, generate, translate, unilm-generate, predict, serve): one --model/--device(/--precision)
group with one default device, one -o/--out/--overwrite group, and the stderr notes that say what was
done to the input (truncated lines, blank lines)."""

from .args import add_out_argument

DEVICE_HELP = "cpu, cuda, cuda:N, mps or auto (default: a GPU when there is one, else cpu)"


MODEL_HELP = ("an HF-format BERT folder (config.json, model.safetensors or pytorch_model.bin, vocab.txt), "
              "a google-research/bert folder (bert_config.json, vocab.txt, bert_model.ckpt.index and .data-*), "
              "or 'minilm' for the packaged all-MiniLM-L6-v2")


def add_model_arguments(p, help: str = MODEL_HELP, metavar: str | None = None, precision: bool = False):
    """--model, --device (default auto) and, with `precision`, --precision: the arguments every
    command that runs a trained model shares."""
    p.add_argument("--model", required=True, metavar=metavar, help=help)
    add_device_argument(p)
    if precision:
        p.add_argument("--precision", choices=["fp32", "bf16", "fp16"], default="fp32",
                       help="fp32 (default); bf16 or fp16 autocast (bf16 on CPU needs AVX512-BF16 or AMX to be faster)")


def add_device_argument(p):
    p.add_argument("--device", default="auto", help=DEVICE_HELP)


def add_output_arguments(p, required: bool, metavar: str, help: str):
    """-o/--out (the old spellings still parse, hidden; args.add_out_argument) and --overwrite."""
    add_out_argument(p, help, metavar, required)
    p.add_argument("--overwrite", action="store_true", help="replace OUT if it exists (refused otherwise)")


def numbered(numbers, noun: str = "line", shown: int = 10) -> str:
    """[3, 7] -> "lines 3, 7": the first `shown` numbers (counting from 1) for a note."""
    listed = ", ".join(map(str, numbers[:shown])) + (", ..." if len(numbers) > shown else "")
    return f"{noun if len(numbers) == 1 else noun + 's'} {listed}"


def truncation_note(cut: list[int], total: int, max_seq_length: int, what: str = "lines",
                    noun: str = "line") -> str | None:
    """The stderr note naming the lines (numbered from 1) that were cut, or None when none was."""
    if not cut:
        return None
    return (f"note: {len(cut)} of {total} {what} were longer than --max-seq-length {max_seq_length} "
            f"tokens and were truncated ({numbered(cut, noun)})")
